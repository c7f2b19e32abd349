"""A target's sustained capacity on the machine at hand, measured by emulation runs.

Every point is an ordinary run of a shipped scenario at one offered rate,
with one row of what it achieved (``point_row``): input and output rates,
losses before and after the switch, and whether it was *sustained* (nothing
lost and the output kept up).  ``RatePoints.capacity`` doubles the rate until
a point is not sustained, then bisects (``highest_held``); with ``repeats``
it runs each rate that many times and goes by the majority.  The rate sweep
(S4 Fig. 8), the CPU-policy comparison and calibrated scenario sets all
measure through it, so a slower machine runs an experiment at a rate it
carries instead of failing its check.  p4cep's capacity trials, of a switch
alone on veth pairs, search the same way (``cep.capacity_search``).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

import pandas as pd
from pydantic import Field

from testbed.experiments.base import ExperimentKind
from testbed.experiments.shipped import scenario, scenario_run
from testbed.rundir import RunDir
from testbed.semantics.strict import Rate, StrictModel
from testbed.semantics.topology import Topology

#: A source that achieves less than this share of the offered rate is the
#: bottleneck itself; doubling further measures the source, not the switch.
SOURCE_LIMIT = 0.8
#: A run keeps up when its output rate is at least this share of its input
#: rate times the copies per event.
KEEP_UP = 0.9


class Calibration(StrictModel):
    """A short measurement of a target's sustained capacity on this machine:
    runs of ``scenario`` from ``start`` events/s, doubling until one loses or
    falls behind (or ``max_rate``), then ``refine`` bisection steps."""

    scenario: str = "cbtw1"
    start: Rate = 2000
    max_rate: Rate = 64000
    refine: int = Field(default=2, ge=0, le=20, description="bisection steps after the first loss")
    repeats: int = Field(default=1, ge=1, le=9, description="runs per offered rate: it holds when most are sustained")


class ScenarioCalibration(Calibration):
    """Rates chosen for this machine: each scenario runs at most at
    ``fraction`` of the calibrated capacity, shared among the packets each of
    its events costs the switch (one in, then its copies out)."""

    fraction: float = Field(default=0.5, gt=0, le=1)
    seconds: float = Field(default=1.0, gt=0, le=60, description="stream duration of each calibration point")


def classify(checks: dict[str, Any]) -> dict[str, int]:
    """Where a point's copies went wrong, from its run's checks (``testbed.analysis.check``).

    Above a target's capacity events are lost, before the switch or after it
    (``missing``: the switch saw the event but its copy never arrived): that
    is the saturation the figure measures.  A copy where the definition puts
    none (``extra``, which includes a copy at the wrong operator) or twice
    (``duplicates``) is wrong at any rate: those are ``faults``.
    """
    def total(key: str) -> int:
        return sum(int(c.get(key) or 0) for c in checks.values())

    return {"lost_before_switch_checked": total("lost_before_switch") + total("lost_on_link"),
            "missing_after_switch": total("missing"),
            "faults": total("extra") + total("duplicates")}


def point_row(rundir: RunDir) -> dict[str, Any]:
    """What one run says about rates: achieved input, received output, losses."""
    run, verdicts = rundir.read_record(), rundir.read_verdicts()
    acct = verdicts.accounting.get("streams", {}) if verdicts else {}
    sources = pd.read_parquet(rundir.sources, columns=["send_ns"])
    deliveries = pd.read_parquet(rundir.deliveries, columns=["recv_ns"])

    def rate(ns: pd.Series) -> float:
        span = (ns.max() - ns.min()) / 1e9 if len(ns) > 1 else 0.0
        return (len(ns) - 1) / span if span > 0 else float("nan")

    input_rate, output_rate = rate(sources["send_ns"]), rate(deliveries["recv_ns"])
    copies = (run.expected_deliveries or 0) / max(1, len(sources))
    # Every loss, wherever it happened: copies that went missing after the switch,
    # and events that never reached it (the accounting keeps the two apart).
    lost = sum(s.get("lost", 0) + (s.get("lost_events") or 0) for s in acct.values())
    return {"sent": len(sources), "input_rate": input_rate,
            "copies_expected": run.expected_deliveries, "copies_received": len(deliveries),
            "output_rate": output_rate, "sustained": bool(lost == 0 and output_rate >= KEEP_UP * input_rate * copies),
            "switch_copies_out": sum(s.get("switch_copies_out") or 0 for s in acct.values()),
            "lost": lost,
            "lost_before_switch": sum(s.get("lost_before_switch") or 0 for s in acct.values()),
            "lost_after_switch": sum(s.get("lost_after_switch") or 0 for s in acct.values()),
            "checks_ok": verdicts is not None and verdicts.ok,
            **classify({k: v.model_dump() for k, v in verdicts.check.items()} if verdicts else {})}


class RatePoints:
    """Runs of a scenario at offered rates on a target, one row each, kept in
    ``out`` (a Parquet file rewritten after every run); and the sustained
    capacity found from them.

    ``spark`` runs the operators' Spark application beside every point (the
    rates are the switch's, so by default it does not: it would only compete
    for the CPU); ``policy`` is the switch's CPU policy in them."""

    def __init__(self, kind: ExperimentKind, out: Path, seconds: float, min_events: int, spark: bool = False,
                 policy: Optional[str] = None, prefix: str = "", stream_update: Optional[dict[str, Any]] = None,
                 extra_row: Optional[Callable[[RunDir], dict[str, Any]]] = None):
        self.kind, self.out = kind, out
        self.seconds, self.min_events = seconds, min_events
        self.spark, self.policy = spark, policy or kind.settings.switch_cpu
        self.prefix = prefix
        #: What every point changes in the scenario's first stream beside its events and rate (``batch``, say).
        self.stream_update = stream_update or {}
        #: More columns for a point's row, read from its run (``point_row`` gives the rates).
        self.extra_row = extra_row
        self.rows: list[dict[str, Any]] = []

    def point(self, target: str, name: str, offered: float, phase: str,
              fraction: Optional[float] = None, repeat: int = 0) -> dict[str, Any]:
        path, topo = scenario(name)
        events = max(self.min_events, round(offered * self.seconds))
        stream = topo.streams[0].model_copy(update={**self.stream_update, "events": events, "rate": offered})
        topo = topo.model_copy(update={"streams": [stream, *topo.streams[1:]]})
        expdir = self.kind.expdir
        rundir = expdir.run(f"{self.prefix}{target}-{name}-{len(self.rows):03d}")
        scenario_run(topo, path, target, rundir, replace(self.kind.settings, spark=self.spark,
                                                         switch_cpu=self.policy))
        row = {"target": target, "scenario": name, "phase": phase, "fraction": fraction, "offered": offered,
               "repeat": repeat, "held": None, "policy": self.policy, "spark": self.spark,
               "events": events, "run_dir": str(rundir.root.relative_to(expdir.root)), **point_row(rundir),
               **(self.extra_row(rundir) if self.extra_row else {})}
        self.rows.append(row)
        pd.DataFrame(self.rows).to_parquet(self.out, index=False)
        return row

    def held(self, target: str, name: str, offered: float, repeats: int) -> Optional[dict[str, Any]]:
        """Run up to ``repeats`` points at ``offered``: whether most of them
        were sustained, as every one's row then says (``held``).  A single
        run passes or fails by a few lost frames near capacity, so one
        verdict is noise where a majority is not.  The runs stop once the
        majority is decided.  Returns the held point's lower median run by
        achieved input rate, or ``None``."""
        rows, held = by_majority(lambda i: self.point(target, name, offered, "calibration", repeat=i),
                                 repeats, lambda row: row["sustained"])
        for r in rows:
            r["held"] = held
        pd.DataFrame(self.rows).to_parquet(self.out, index=False)
        return median_run([r for r in rows if r["sustained"]]) if held else None

    def capacity(self, target: str, c: "Calibration") -> float:
        """The highest input rate (achieved, events/s) at which runs of the
        calibration scenario held (``held``): double, then bisect."""
        def source_bound(row: dict[str, Any], rate: float) -> bool:
            if row["input_rate"] < SOURCE_LIMIT * rate:
                self.kind.log(f"{target}: the source reaches only {row['input_rate']:.0f} of {rate:.0f} events/s")
                return True
            return False

        sustained, _failed = highest_held(lambda rate: self.held(target, c.scenario, rate, c.repeats),
                                          c.start, c.max_rate, c.refine, source_bound)
        if sustained is None:
            raise RuntimeError(f"{target}: {c.scenario} was not sustained even at {c.start:.0f} events/s; "
                               f"lower calibration.start")
        return float(sustained["input_rate"])


Held = TypeVar("Held")
Run = TypeVar("Run")


def by_majority(run: Callable[[int], Run], repeats: int, passed: Callable[[Run], bool]) -> tuple[list[Run], bool]:
    """Up to ``repeats`` runs (``run(i)`` for the i-th), stopping once most
    of them have decided: the runs, and whether most ``passed``.  Near a
    capacity one run passes or fails by a few frames lost to a slow spell
    of the machine, where a majority is less of a coin."""
    need = repeats // 2 + 1
    runs: list[Run] = []
    while len(runs) < repeats:
        runs.append(run(len(runs)))
        ok = sum(passed(r) for r in runs)
        if ok >= need or len(runs) - ok > repeats - need:
            break
    return runs, sum(passed(r) for r in runs) >= need


def highest_held(held: Callable[[float], Optional[Held]], start: float, max_rate: float, refine: int,
                 source_bound: Callable[[Held, float], bool] = lambda _row, _rate: False
                 ) -> tuple[Optional[Held], Optional[float]]:
    """The search for a capacity: offer ``start``, doubling while ``held``
    returns what held (not None) and up to ``max_rate`` itself, then ``refine``
    bisection steps between the highest rate held and the lowest not.
    ``source_bound`` ends the doubling when the sender, not the switch,
    fell short.  Returns what the highest rate held gave (None when even
    ``start`` did not hold), and the lowest rate that did not (None when
    none failed)."""
    sustained: Optional[Held] = None
    low, failed = 0.0, None
    rate = start
    while rate <= max_rate:
        row = held(rate)
        if row is None:
            failed = rate
            break
        sustained, low = row, rate
        if source_bound(row, rate) or rate >= max_rate:
            break
        rate = min(rate * 2, max_rate)
    for _ in range(refine if failed else 0):
        mid = (low + failed) / 2
        row = held(mid)
        if row is None:
            failed = mid
        else:
            sustained, low = row, mid
    return sustained, failed


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The lower median of ``runs`` by achieved input rate: the run a held
    rate's capacity is read from (of two, the slower)."""
    return sorted(runs, key=lambda r: r["input_rate"])[(len(runs) - 1) // 2]


def machine_capacity(kind: ExperimentKind, target: str, c: ScenarioCalibration) -> float:
    """This machine's sustained capacity for ``target``, measured once for a
    calibrated experiment (its runs go to ``runs/calibration-*``)."""
    points = RatePoints(kind, kind.expdir.raw / f"calibration-{target}.parquet", c.seconds, 200,
                        prefix="calibration-")
    found = points.capacity(target, c)
    kind.log(f"{target}: sustained {found:.0f} events/s of {c.scenario} on this machine")
    return found


def calibrated(topo: Topology, capacity: float, fraction: float) -> tuple[Topology, dict[str, Any]]:
    """``topo`` with each stream at most at ``fraction`` of ``capacity`` (events/s of
    a stream with one copy per event, so two packets at the switch), shared
    among the streams by the packets each event costs: one in, and its copies
    out.  The events stay as many; a slower rate only makes the run longer."""
    budget = fraction * capacity * 2                     # packets/s the switch sustained, with headroom
    cost = {s.id: 1 + s.copies() / s.events for s in topo.streams}
    demand = sum(s.rate * cost[s.id] for s in topo.streams)
    scale = min(1.0, budget / demand)
    streams = [s.model_copy(update={"rate": s.rate * scale}) for s in topo.streams]
    entry = {"rate_scale": round(scale, 4), "rates": {str(s.id): round(s.rate, 1) for s in streams},
             "topology_rates": {str(s.id): s.rate for s in topo.streams}}
    return topo.model_copy(update={"streams": streams}), entry
