"""The emulated network and the processes on its hosts: Mininet, network
namespaces, process bookkeeping and cleanup, and the source and receiver programs."""
