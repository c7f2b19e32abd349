"""The burst a switch's input keeps while the switch process is off the CPU.

A busy machine keeps the switch process off the CPU now and then, for tens
of milliseconds.  What arrives meanwhile waits in the port's packet socket
(the embedded switch) or libpcap ring (bmv2), or is lost there: the
``switch socket`` place of a run's accounting.  Here the switch is stopped
(SIGSTOP) while a burst of one stream's frames arrives, then continued; its
pipeline's ``stream_in`` counter says how many of them its input had kept.

bmv2 is measured twice: with its ports as the testbed starts it (TSO, GSO
and GRO off, ``frame_sized_rings``) and with a veth's default offloads on,
which make libpcap size each ring slot for a 64 KiB packet.
"""
from __future__ import annotations

import signal
import time
from typing import Any, Optional

from pydantic import Field

from testbed.dataplane.control import Controller
from testbed.emulation.veth import VethRig, send_frames
from testbed.experiments.base import live_switch
from testbed.experiments.bench.costs import TEMPLATE, one_stream
from testbed.rundir import ExperimentDir
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.strict import Rate, StrictModel
from testbed.semantics.topology import parse_topology
from testbed.targets.bmv2.process import Bmv2Process, frame_sized_rings

#: One operator, on switch port 2; the source on port 1.
OPERATORS = 1
#: ``stream_in`` must hold still this long before the switch counts as done with the burst.
SETTLED_S = 0.5
TIMEOUT_S = 30.0
#: How each target's ports are set up: the testbed's way, and (bmv2) a veth's defaults.
AS_STARTED, VETH_DEFAULTS = "as the testbed starts it", "veth default offloads"


class StalledParams(StrictModel):

    burst: int = Field(default=4000, ge=10, le=100_000, description="frames sent while the switch is stopped")
    rate: Rate = Field(default=20_000, description="frames per second of the burst")


class Bmv2WithDefaultOffloads(Bmv2Process):
    """simple_switch on ports whose TSO, GSO and GRO are on, as a new veth's are."""

    def port_setup(self) -> list[list[str]]:
        return frame_sized_rings(self.ports, offloads="on")


def settled(read, timeout: float = TIMEOUT_S) -> int:
    """The value of ``read()`` once it has not changed for ``SETTLED_S``."""
    value, since, deadline = read(), time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = read()
        if now != value:
            value, since = now, time.monotonic()
        elif time.monotonic() - since >= SETTLED_S:
            return value
    raise TimeoutError(f"the switch's stream_in still changed after {timeout:g} s")


def kept_while_stopped(target: str, process_class: Optional[type], rig: VethRig, expdir: ExperimentDir,
                       params: StalledParams) -> int:
    """Frames of a burst that a stopped switch's pipeline counted once it ran again."""
    topo = parse_topology(one_stream(1, 1, OPERATORS, events=params.burst, rate=params.rate))
    frames = [TEMPLATE.frame(seq, seq) for seq in range(params.burst)]
    with live_switch(target, expdir, f"stalled-{target}", rig, process_class=process_class) as (proc, api):
        Controller(api).install(SplitterPlan(topo))
        proc.proc.send_signal(signal.SIGSTOP)
        try:
            send_frames(rig.host_ends[1], frames, params.rate)
        finally:
            proc.proc.send_signal(signal.SIGCONT)
        return settled(lambda: api.counter_read("stream_in", topo.streams[0].id)[1])


def stalled_input(targets: list[str], expdir: ExperimentDir, params: StalledParams) -> list[dict[str, Any]]:
    """One row per target and way of setting up its ports: the burst, what was kept, what was lost."""
    rows = []
    for target in targets:
        setups: list[tuple[str, Optional[type]]] = [(AS_STARTED, None)]
        if target == "bmv2":
            setups.append((VETH_DEFAULTS, Bmv2WithDefaultOffloads))
        for ports, process_class in setups:
            # A rig of its own each time: ethtool's settings stay with the interfaces.
            with VethRig(1 + OPERATORS) as rig:
                kept = kept_while_stopped(target, process_class, rig, expdir, params)
            rows.append({"target": target, "ports": ports, "burst": params.burst, "rate": params.rate,
                         "kept": kept, "lost": params.burst - kept})
    return rows
