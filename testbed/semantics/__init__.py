"""What the testbed means, with no I/O: topologies, window semantics and the
oracle, the splitter plan, queries and workloads.  Importing a module here
starts nothing; ``windows`` and ``queries`` need only numpy, so Spark ships them."""
