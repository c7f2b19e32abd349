"""What the testbed's in-process parts cost per event: the oracle, the model's pipeline, a plan.

No root and no network: these time the Python code itself, so that a
change that slows the oracle or the embedded target's pipeline shows up as
a number in ``results/bench/``.  Each function returns one row per
measured configuration.
"""
from __future__ import annotations

import time
import tracemalloc
from typing import Any

from pydantic import Field

from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import FrameTemplate
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.strict import MAX_MEASURED_EVENTS, EventCount, StrictModel
from testbed.semantics.topology import parse_topology
from testbed.semantics.windows import CountWindows, StreamOracle

#: The frames every in-process part sends: stream 1 from one source to the splitter.
TEMPLATE = FrameTemplate("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254", 1)
#: Window specifications the pipeline is timed with: (size, slide).
PIPELINE_SPECS = {"tumbling n=100 slide=100": (100, 100), "sliding n=5 slide=1": (5, 1),
                  "sliding n=5 slide=2": (5, 2)}
#: Plans whose size is measured: N against (size, slide).
PLAN_N = (2, 4, 8, 16, 32, 64)
PLAN_SPECS = ((5, 1), (5, 2), (100, 30), (10, 10))


class CostParams(StrictModel):
    """How many events each in-process part times."""

    oracle_events: EventCount = 200_000
    pipeline_events: int = Field(default=100_000, ge=4, le=MAX_MEASURED_EVENTS)
    lateness_events: EventCount = 60_000


def one_stream(size: int, slide: int, n_ops: int, kind: str = "count", events: int = 1,
               rate: float = 1) -> dict[str, Any]:
    """A topology of one stream from ``src`` to operators ``op0..``, as the YAML would have it."""
    hosts = {"src": {}} | {f"op{i}": {} for i in range(n_ops)}
    return {"name": "bench", "hosts": hosts, "streams": [
        {"id": 1, "source": "src", "window": {"kind": kind, "size": size, "slide": slide},
         "operators": [f"op{i}" for i in range(n_ops)], "events": events, "rate": rate}]}


def installed(data: dict[str, Any]) -> SplitterPipeline:
    pipe = SplitterPipeline()
    Controller(pipe).install(SplitterPlan(parse_topology(data)))
    return pipe


def oracle_rate(events: int) -> list[dict[str, Any]]:
    """Verdicts per second of the window oracle on a sliding count window."""
    oracle = StreamOracle(CountWindows(5, 1), [f"o{i}" for i in range(6)])
    t0 = time.perf_counter()
    for k in range(events):
        oracle.step(k, k)
    seconds = time.perf_counter() - t0
    return [{"spec": "count n=5 slide=1 N=6", "events": events, "seconds": seconds, "events_per_s": events / seconds}]


def pipeline_rates(events: int) -> list[dict[str, Any]]:
    """Per window specification: ingress decisions and whole frames per second
    of the model; then the memory an empty pipeline takes."""
    rows = []
    for label, (size, slide) in PIPELINE_SPECS.items():
        pipe = installed(one_stream(size, slide, 6))
        t0 = time.perf_counter()
        for k in range(events):
            pipe.replicate(pipe.ingress(1, k))
        t_ingress = time.perf_counter() - t0
        frames = [TEMPLATE.frame(k, k) for k in range(events // 4)]
        pipe.register_reset("initialized")       # the frames start the stream again
        copies = 0
        t0 = time.perf_counter()
        for frame in frames:
            copies += len(pipe.process(frame))
        t_frames = time.perf_counter() - t0
        rows.append({"spec": label, "decisions_per_s": events / t_ingress, "frames_per_s": len(frames) / t_frames,
                     "copies_per_frame": copies / len(frames)})
    tracemalloc.start()
    SplitterPipeline()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rows.append({"spec": "memory of an empty pipeline (registers for 65,536 streams)", "peak_bytes": peak})
    return rows


def lateness_costs(events: int, slide: int = 100) -> list[dict[str, Any]]:
    """The model's ingress time per event, in order against late by 0..4 slides.

    Each late event is a copy of an in-order stream's event sent again
    ``back`` slides behind the newest, so the registers stay the same and
    only the path through the pipeline differs.
    """
    data = one_stream(200, slide, 6, kind="time")
    data["streams"][0]["window"]["lateness"] = 4 * slide
    rows = []
    for back in (None, 0, 1, 2, 3, 4):
        pipe = installed(data)
        pipe.ingress(1, 0)                       # the origin
        newest = 10 * slide + slide // 2
        pipe.ingress(1, newest)                  # the newest timestamp, half way into slide 10
        late_ts = newest if back is None else newest - (slide // 4 if back == 0 else back * slide)
        if pipe.ingress(1, late_ts).drop:
            # a dropped event takes a shorter path: its time would not be the late path's
            raise RuntimeError(f"lateness: the event {back} slides back was dropped")
        t0 = time.perf_counter()
        for _ in range(events):
            pipe.replicate(pipe.ingress(1, late_ts))
        seconds = time.perf_counter() - t0
        rows.append({"event": "in order" if back is None else f"late, {back} slides back",
                     "ns_per_event": seconds / events * 1e9, "events": events})
    return rows


def plan_costs() -> list[dict[str, Any]]:
    """Entries and multicast groups of a plan, and the time to compute it, as N grows."""
    rows = []
    for n_ops in PLAN_N:
        for size, slide in PLAN_SPECS:
            topo = parse_topology(one_stream(size, slide, n_ops))
            t0 = time.perf_counter()
            cost = SplitterPlan(topo).cost()
            rows.append({"N": n_ops, "size": size, "slide": slide, "seconds": time.perf_counter() - t0, **cost})
    return rows
