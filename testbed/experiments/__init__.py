"""Experiments: what the testbed measures to reproduce the papers' evaluation.

Each experiment file (``experiments/<name>.yaml``) names one kind; a kind is
one small class (``base.ExperimentKind``) that measures, writes raw data
through ``ExperimentDir`` and draws its figures from that data.  Adding a
kind is a module and one line in ``KINDS``:

- ``scenarios``: a set of emulation runs and one load figure (S4 Fig. 6, P4SS Fig. 5);
- ``resources``: plan sizes against N and streams, read back from live
  targets, and the compiled program (S4 Table IV, Fig. 7; P4SS Fig. 6);
- ``control``: time to install one stream against N (S4 Fig. 9);
- ``latency``: time a frame spends in the switch, against plain forwarding (S4 Table V);
- ``rates``: output against input rate up to and past saturation (S4 Fig. 8);
- ``e2elatency``: result latency and operator lag against input rate, with
  the Spark operators live, up to where they stop keeping up (issue 21);
- ``batching``: lossless capacity, frames, bytes and latency per event
  against the number of events per frame (issue 23);
- ``cep``: the CEP stage's latency and throughput against the window size
  (P4CEP Fig. 4; issue 22);
- ``cepadapt``: CEP patterns installed, replaced and removed mid-stream,
  against the oracle (issue 22);
- ``scale``: whole runs at N operator instances on shared hosts, N swept to a
  thousand and more, both targets (S4's scale live; issue 43);
- ``variants``: one topology with a patch per run (real-world data against
  lateness; window splitting against key splitting under skew; issue 24);
- ``startrule``: time streams with windows on the grid against windows that
  start at events (S4's rule), event by event through the data plane (issue 45);
- ``adaptation``: a topology whose streams change, fail or scale while they
  run (P4SS's adaptability; issue 9);
- ``bench``: the testbed's own speed and memory (``make bench``; package ``bench``);
- ``soak``: runs aborted at random phases, then what they left counted (``make soak``).

The last two are not paper figures: their files say ``in_figures: false``,
so ``testbed experiment all`` leaves them out.

``paper`` holds the papers' numbers every kind is compared with.
"""
from __future__ import annotations

import importlib

KINDS = {
    "scenarios": "testbed.experiments.scenarios:ScenarioRuns",
    "resources": "testbed.experiments.resources:Resources",
    "control": "testbed.experiments.control:ControlTime",
    "latency": "testbed.experiments.latency:Latency",
    "rates": "testbed.experiments.rates:RateSweep",
    "e2elatency": "testbed.experiments.e2elatency:ResultLatency",
    "cpupolicy": "testbed.experiments.cpupolicy:CpuPolicyCapacity",
    "batching": "testbed.experiments.batching:BatchCapacity",
    "cep": "testbed.experiments.cep:CepWindowCost",
    "cepadapt": "testbed.experiments.cepadapt:CepAdaptation",
    "scale": "testbed.experiments.scale:ScaleRuns",
    "adaptation": "testbed.experiments.adaptation:Adaptation",
    "variants": "testbed.experiments.variants:Variants",
    "startrule": "testbed.experiments.startrule:StartRule",
    "bench": "testbed.experiments.bench.kind:Bench",
    "soak": "testbed.experiments.soak:Soak",
}


def kind_class(kind: str):
    """The ``ExperimentKind`` subclass of ``kind``, imported on demand."""
    try:
        module, cls = KINDS[kind].split(":")
    except KeyError:
        raise ValueError(f"unknown experiment kind {kind!r}; known: {', '.join(KINDS)}") from None
    return getattr(importlib.import_module(module), cls)
