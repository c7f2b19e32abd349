"""Time in the switch: kernel timestamps of frames going into a live switch and of copies coming out.

This is the one implementation for every experiment that times the switch
itself: S4 Table V (``latency``) and the bench's late events.  The switch
runs on the veth pairs of a ``VethRig``, in a namespace of its own.
``StampedTaps`` note the kernel's timestamp of every event frame as it
arrives on the switch's ingress interface and as each copy leaves on an
egress interface.  The difference is the time in the switch process (socket
wake-up, pipeline, send), without the sender, the veth crossing or any
receiver in it.
"""
from __future__ import annotations

from typing import Optional

import pandas as pd

from testbed.dataplane.control import Controller
from testbed.emulation.placement import CpuPlacement, sending_on
from testbed.emulation.veth import StampedTaps, VethRig, send_frames
from testbed.experiments.base import live_switch
from testbed.rundir import ExperimentDir
from testbed.semantics.plan import SplitterPlan

#: Frames go into the switch on this port.
SOURCE_PORT = 1
#: Capture ends this long after the last frame seen.
QUIET_S = 1.0
STAMP_COLUMNS = ["direction", "port", "stream", "seq", "ns"]


def time_in_switch(target: str, expdir: ExperimentDir, rig: VethRig, name: str, frames: list[bytes],
                   rate: float, out_ports: set[int], plan: Optional[SplitterPlan] = None,
                   forward: Optional[dict[int, int]] = None) -> list[tuple]:
    """Start ``target`` on ``rig`` (with ``plan`` installed, or in forwarding
    mode), send ``frames`` into port 1 at ``rate``, and return the taps'
    rows: ``(direction, port, stream, seq, ns)`` for every frame in and every
    copy out on ``out_ports``.  The switch stops on return.  A plan whose
    topology changes no stream runs on the build without changes, as in a run."""
    changes = plan is None or plan.topology.changes_streams()
    with live_switch(target, expdir, name, rig, forward=forward, changes=changes) as (_proc, api):
        if plan is not None:
            Controller(api).install(plan)
        rows, _drops = stamped_send(rig, frames, rate, out_ports)
        return rows


def stamped_send(rig: VethRig, frames: list[bytes], rate: float, out_ports: set[int],
                 placement: Optional[CpuPlacement] = None) -> tuple[list[tuple], int]:
    """``frames`` sent at ``rate`` into port 1 of the switch already running
    on ``rig`` (from the sender's CPUs of ``placement``, when given): the
    taps' rows for every frame in and every copy out on ``out_ports``, and
    the frames the taps' sockets dropped."""
    taps = StampedTaps({SOURCE_PORT: rig.switch_ends[SOURCE_PORT]},
                       {port: rig.switch_ends[port] for port in out_ports}, rig.namespace.path)
    try:
        with sending_on(placement):
            send_frames(rig.host_ends[SOURCE_PORT], frames, rate)
        return taps.drain(QUIET_S), taps.kernel_drops
    finally:
        taps.close()


def copy_times(rows: list[tuple]) -> pd.DataFrame:
    """One row per copy out: its stream, seq and port, its event's time in
    (``in_ns``, missing when the ingress tap did not see the event), its own
    time out, the difference (``latency_ns``) and which copy of the event it
    was (``copy``, 0 for the first out)."""
    taps = pd.DataFrame(rows, columns=STAMP_COLUMNS)
    ins = taps[taps["direction"] == "in"].drop_duplicates(["stream", "seq"]).set_index(["stream", "seq"])["ns"]
    outs = taps[taps["direction"] == "out"].rename(columns={"ns": "out_ns"}).drop(columns="direction")
    outs = outs.join(ins.rename("in_ns"), on=["stream", "seq"])
    outs["latency_ns"] = outs["out_ns"] - outs["in_ns"]
    outs["copy"] = outs.groupby(["stream", "seq"])["out_ns"].rank(method="first").astype(int) - 1
    return outs
