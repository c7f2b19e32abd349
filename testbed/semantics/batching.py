"""Which of a stream's events share a frame, and when each frame leaves.

A batched stream (``batch: {events: k, max_delay: d}``) packs consecutive
events into frames of at most ``k``.  A frame closes when it holds ``k``
events, or when the next event is due more than ``d`` seconds after the
frame's first: the source cannot hold the first longer.  A full frame
leaves when its last event is due; a frame that closed early leaves ``d``
seconds after its first event was due (the source waited that long for
more), and the stream's last frame, or one before a point where the stream
is held, leaves with its last event.  So each event waits at most ``d`` for
its frame, and ``wait`` says how long it did.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np


@dataclass(frozen=True)
class FramePlan:
    """A stream's frames: ``ends[f]`` is how many events frames 0..f carry,
    ``due[f]`` when frame f leaves (seconds from the start, as the events' offsets)."""

    ends: np.ndarray
    due: np.ndarray

    def __len__(self) -> int:
        return len(self.ends)

    def starts(self) -> np.ndarray:
        return np.concatenate(([0], self.ends[:-1])).astype(np.int64)

    def frame_of_event(self) -> np.ndarray:
        """Per event, the index of the frame that carries it."""
        sizes = self.ends - self.starts()
        return np.repeat(np.arange(len(self.ends), dtype=np.int64), sizes)

    def wait(self, offsets: np.ndarray) -> np.ndarray:
        """Per event, the seconds it waits for its frame to leave."""
        return self.due[self.frame_of_event()] - offsets


def plan_frames(offsets: np.ndarray, events: int, max_delay: float, cuts: Iterable[int] = ()) -> FramePlan:
    """The frames of a stream whose event ``i`` is due ``offsets[i]`` seconds
    after the start, at most ``events`` per frame; no frame spans one of
    ``cuts`` (event counts where the stream is held)."""
    n = len(offsets)
    cut_at = sorted(c for c in set(cuts) if 0 < c < n)
    ends, due = [], []
    start = 0
    next_cut = 0
    while start < n:
        while next_cut < len(cut_at) and cut_at[next_cut] <= start:
            next_cut += 1
        limit = min(n, start + events, cut_at[next_cut] if next_cut < len(cut_at) else n)
        first = offsets[start]
        end = start + 1
        while end < limit and offsets[end] - first <= max_delay:
            end += 1
        full = end - start == events
        held = end == n or (next_cut < len(cut_at) and end == cut_at[next_cut])
        ends.append(end)
        due.append(float(offsets[end - 1]) if full or held else float(first + max_delay))
        start = end
    return FramePlan(np.asarray(ends, dtype=np.int64), np.asarray(due, dtype=np.float64))
