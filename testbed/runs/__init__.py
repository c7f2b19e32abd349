"""Runs: the run directory, the orchestrator and its phases, the record
(collect, accounting, checks).  Experiments over several runs are
``testbed.experiments``."""
