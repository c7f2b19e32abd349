"""Runs and experiments: the run directory, the orchestrator and its phases,
the record (collect, accounting, checks), and experiments over several runs."""
