"""The bench (``make bench``): speed and memory of the testbed's own parts, written to files.

Measured, not asserted: each part records what it measured on this
machine, and ``experiment.json`` says on which machine and how loaded it
was.  The parts, each a module here:

- ``costs`` (in process): the oracle's verdicts per second; the model's
  pipeline, tumbling and sliding, and its register memory; its cost per
  event in order against late; a plan's entries and groups as N grows;
- ``late`` (root, veth pairs): time inside each target for in-order and late events;
- ``reconfig`` (root, veth pairs): changes of a stream's operators while its events flow;
- ``runs`` (root, Mininet): the embedded target at increasing offered
  rates, and the scale runs (1,000 streams, 64 operators, 1,000,000 events with Spark).

``kind`` runs the parts a file selects; ``figures`` draws them; ``files`` names the files.
"""
