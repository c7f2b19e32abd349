"""The embedded software target: the splitter model on real interfaces.

It exists for machines without p4c and bmv2:

- ``dataplane``: frames in over AF_PACKET sockets, the model, frames out;
- ``server``: the switch process, with a JSON-lines control server on loopback;
- ``client``: ``EmbeddedAPI``, the control client;
- ``node``: ``EmbeddedSwitch``, the Mininet node that starts the process.
"""
