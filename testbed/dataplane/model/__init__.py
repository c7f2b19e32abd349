"""A data-plane model of the splitter: the pipeline the embedded target runs.

It implements the contract of ``testbed.dataplane.contract`` and mirrors
``p4/`` file by file, one module each:

- ``state``: registers, tables, the replication engine and counters, behind
  the control API (p4/state.p4 and what bmv2's runtime serves);
- ``metadata``: what the stages hand each other (p4/headers.p4's metadata);
- ``division``: the shift-and-subtract steps p4/slides.p4 unrolls;
- ``slides``: the slide tracker (p4/slides.p4);
- ``counts``: the build without changes' cell for a count stream (p4/counts.p4);
- ``epochs``: changes taking effect at a window boundary (p4/epochs.p4);
- ``forwarding``: ingress, the destination tables and replication (p4/forwarding.p4);
- ``egress``: each copy's Windows header and addresses (p4/egress.p4);
- ``batches``: several events in one frame, per-event ingress, one
  replication, per-replica egress (p4/batches.p4);
- ``cep``: complex event processing beside the splitter (p4/cep.p4).

It takes no shortcut through ``testbed.semantics.windows``: the tests hold
it to that oracle, and the differential tests hold bmv2 to it.
"""
from testbed.dataplane.model.batches import Batches
from testbed.dataplane.model.cep import CepStage
from testbed.dataplane.model.division import shift_subtract_divmod, step_back
from testbed.dataplane.model.egress import Address, Egress, Replica, copy_back
from testbed.dataplane.model.epochs import EpochSwitch, old_windows_after
from testbed.dataplane.model.forwarding import Forwarding
from testbed.dataplane.model.metadata import CopyMeta, Decision, PreviousParams, SlideOutcome, WindowParams
from testbed.dataplane.model.slides import SlideTracker
from testbed.dataplane.model.state import ControlState


class SplitterPipeline(Batches, CepStage, Forwarding, SlideTracker, EpochSwitch, Egress, ControlState):
    """One splitter switch: its state and control API, and its pipeline's stages."""


__all__ = [
    "Address", "Batches", "CepStage", "ControlState", "CopyMeta", "Decision", "Egress", "EpochSwitch", "Forwarding",
    "PreviousParams", "Replica", "SlideOutcome", "SlideTracker", "SplitterPipeline", "WindowParams", "copy_back",
    "old_windows_after", "shift_subtract_divmod", "step_back",
]
