"""In-network stream splitting testbed (S4, P4SS).

The package follows the data's one-way path:

- ``semantics``: topology files, window definitions and the oracle, the plan, workloads, queries;
- ``dataplane``: the P4 contract, the wire format, the embedded model, the controller;
- ``targets``: the switches that run the plan (embedded, bmv2);
- ``emulation``: the Mininet network and the processes on its hosts;
- ``runs``: the run directory, the orchestrator, the record;
- ``analysis``: checks, the Spark application, figures;
- ``experiments``: the papers' evaluation (scenario sets, resources, control time, latency,
  rates), which uses all of the above.
"""
from pathlib import Path

#: The project checkout: topologies/, experiments/, operators/, p4/, results/.
ROOT = Path(__file__).resolve().parent.parent
