"""Runs: one emulation run as phases over the parts it is handed (``orchestrator``,
``parts``, ``hosts``, ``lifecycle``), and the facts it records (``record``).
Judging a run is ``testbed.analysis``; experiments over several runs are
``testbed.experiments``."""
