"""A switch on veth pairs, without Mininet: send frames in, capture what comes out.

The rig itself is ``testbed.emulation.veth.VethRig`` (experiments use it too).
Each switch port is one end of a veth pair, kept in a namespace of the
switch's own (as in a run, so a Thrift server there is reachable only over
its loopback); the test sends and captures on the other ends, in the root
namespace, with AF_PACKET sockets.  Needs root.
"""
from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager
from typing import Iterable, Iterator, Optional

from testbed.dataplane.wire import EVENT_OFFSET, EVENT_STRUCT
from testbed.emulation.veth import Taps, VethRig
from testbed.emulation.veth import send_frames as _send_frames

SEND_RATE = 1500            # events per second: well below what bmv2 forwards without loss
QUIET_S = 1.0               # capture ends this long after the last frame
#: With the count of frames known: how long the switch may stay silent before they have
#: all come (a busy machine stalls bmv2 for longer than QUIET_S), and after they have.
PATIENCE_S = 20.0
EXTRAS_S = 0.25
#: Frames sent before waiting for the switch to answer them: far fewer than bmv2's
#: libpcap ring holds, so a switch that a busy machine stalls delays the test
#: instead of losing frames at its input.
STEP = 200

__all__ = ["VethRig", "Capture", "send_frames", "send_in_steps", "by_event", "event_key"]


def send_frames(ifname: str, frames: list[bytes], rate: float = SEND_RATE) -> None:
    """Send frames on ``ifname`` at a steady ``rate`` per second (default: the tests' rate)."""
    _send_frames(ifname, frames, rate)


def send_in_steps(cap: "Capture", ifname: str, frames: list[bytes], copies: list[int],
                  step: int = STEP, rate: float = SEND_RATE) -> list[tuple[int, bytes]]:
    """Send ``frames`` ``step`` at a time and collect the switch's output on ``cap``.

    ``copies[i]`` is how many frames the model emits for ``frames[i]``.
    Before each step, wait until the frames of the steps already sent have
    come out.  Once the switch falls short of that (a real difference), the
    rest goes without waiting, and the comparison shows what differs.
    """
    expected, keeping_up = 0, True
    for start in range(0, len(frames), step):
        if keeping_up and expected:
            keeping_up = len(cap.wait_for(expected)) >= expected
        send_frames(ifname, frames[start:start + step], rate)
        expected += sum(copies[start:start + step])
    return cap.drain(expect=expected)


class Capture(Taps):
    """Raw sockets on the host ends of the operator ports; event frames only,
    unless ``events_only`` is false."""

    def __init__(self, rig: VethRig, ports: Iterable[int], events_only: bool = True):
        super().__init__({("in", port): rig.host_ends[port] for port in ports}, events_only=events_only)

    @property
    def frames(self) -> list[tuple[int, bytes]]:
        return self.rows

    def wait_for(self, expect: int) -> list[tuple[int, bytes]]:
        """Collect until ``expect`` frames in all, or ``PATIENCE_S`` of silence."""
        return super().drain(PATIENCE_S, expect)

    def drain(self, quiet: float = QUIET_S, expect: Optional[int] = None) -> list[tuple[int, bytes]]:
        """Collect until ``quiet`` seconds pass without an event frame.  With
        ``expect`` (the frames the model emitted), wait up to ``PATIENCE_S`` of
        silence for that many, then ``EXTRAS_S`` more for any extra: a stalled
        switch is waited for, and one that sends too much is still caught."""
        if expect is None:
            return super().drain(quiet)
        super().drain(PATIENCE_S, expect)
        return super().drain(EXTRAS_S)


def event_key(frame: bytes) -> tuple[int, int]:
    stream, _flags, seq, _ts, _k, _v = EVENT_STRUCT.unpack_from(frame, EVENT_OFFSET)
    return stream, seq


def by_event(out: Iterable[tuple[int, bytes]]) -> dict[tuple[int, int], list[tuple[int, bytes]]]:
    """``(stream, seq) -> sorted [(port, frame)]``."""
    res: dict[tuple[int, int], list[tuple[int, bytes]]] = defaultdict(list)
    for port, frame in out:
        res[event_key(frame)].append((port, frame))
    return {k: sorted(v) for k, v in res.items()}


@contextmanager
def running(process) -> Iterator:
    """A switch process (``SwitchProcess``) started, with its control client; both closed after."""
    process.start()
    try:
        api = process.api()
        try:
            yield api
        finally:
            api.close()
    finally:
        process.stop()
