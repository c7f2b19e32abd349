"""The bmv2 target: ``p4/splitter.p4`` on ``simple_switch``, driven over Thrift.

- ``toolchain``: finds p4c, simple_switch and bmv2's Thrift modules; compiles the program;
- ``program``: the compiled JSON's names and widths;
- ``client``: ``Bmv2API``, the contract's control API over Thrift;
- ``process``: the ``simple_switch`` command line, and ``Bmv2Process`` outside Mininet;
- ``node``: ``Bmv2Switch``, the Mininet node.
"""
