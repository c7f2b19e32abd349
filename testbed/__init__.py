"""In-network stream splitting testbed (S4, P4SS).

The package follows the data's one-way path.  Its layers, bottom to top
(a module imports only from layers below its own; setup.cfg's import-linter
contract, run by the test suite, keeps it so):

- ``rundir``: where a run's and an experiment's files are, and the typed run record;
- ``semantics``: topology files, window definitions and the oracle, the plan, workloads, queries;
- ``dataplane``: the P4 contract, the wire format, the embedded model, the controller;
- ``emulation``: the Mininet network, processes, namespaces, and the host programs;
- ``targets``: the switches that run the plan (embedded, bmv2), as Mininet nodes and processes;
- ``runs``: one run as phases over the parts it is handed, and the facts it records;
- ``analysis``: checks and verdicts, the Spark application, figures, comparisons;
- ``experiments``: the papers' evaluation, and the one place that puts runs together from real parts;
- ``cli``, ``api``, ``planview``: the ``testbed`` command and the Python API.
"""
from pathlib import Path

#: The project checkout: topologies/, experiments/, operators/, p4/, results/.
ROOT = Path(__file__).resolve().parent.parent
