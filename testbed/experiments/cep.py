"""P4CEP Fig. 4 on both targets: what the CEP stage costs against the window size n.

P4CEP times one pattern of two basic events, one simple predicate each,
for window sizes n = 0 .. 20 (Fig. 4): latency at 500 events/s, and
throughput.  Here the switch runs on veth pairs outside Mininet, as for S4
Table V (``latency``), and is timed by kernel timestamps on its own
interfaces (``stamps``):

- port 1 takes the events; port 2 gets every event's copy (a count window
  of 1 event, N = 1), so the copies count the events the switch took;
  port 3 is the sink that gets the complex events.
- The pattern is ``[value >= 90]; [max(w) >= 0]`` over a window ``w`` of
  the last n values (``[value >= 90]; [value >= 0]`` for n = 0): every event
  after one of value 90 or more completes a match, so about one event in
  ten yields a complex event, and ``max`` makes the window rescan whenever
  its greatest value leaves (docs/p4.md, "The CEP stage").
- **Latency**: from the completing event arriving on port 1 to its complex
  event leaving on port 3, at ``latency_rate``; plain forwarding (the
  target's baseline program) is timed on the same frames.
- **Throughput**: a blast of frames faster than the switch takes them; the
  rate at which copies leave port 2 while the switch is backlogged, for the
  CEP build with the pattern installed and for plain forwarding.  Ours is
  relative to plain forwarding on the same target; P4CEP's B_p is relative
  to line rate, so the two are set side by side, not compared.
- **Capacity**: for plain forwarding and the splitter alone, the highest
  rate the switch keeps up with, every frame copied and the copies leaving
  as fast as the frames came (``testbed.experiments.capacity``), as S4
  measured its switch: a blast times the switch less the frames it read
  only to drop them.  A rate holds when most of ``capacity_repeats``
  trials at it keep up, as a calibration's does.  Issue 45's target, the
  splitter alone at half of forwarding or more, is read from it
  (``targets``).  Every trial also records the CPU time the switch
  process had, so the cost of an event stands beside the rate.
- **Placement**: where the machine has two CPUs or more, the sender has
  one of its own and the switch the others (``testbed.emulation.placement``),
  so that the two do not take turns on one CPU.
- **Check**: the complex events that left must be exactly the oracle's
  (``testbed.semantics.cep``) over the events the switch took, at either rate.
"""
from __future__ import annotations

import random
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np
import pandas as pd
from pydantic import Field, field_validator

from testbed.analysis.plots import plt, save_figure
from testbed.dataplane.cep import CepControl
from testbed.dataplane.control import Controller
from testbed.dataplane.wire import FrameTemplate
from testbed.emulation.placement import CpuPlacement, cpu_seconds
from testbed.emulation.source import SPLITTER_MAC
from testbed.emulation.veth import VethRig
from testbed.experiments import paper
from testbed.experiments.base import ExperimentKind, KindParams, interruptible, live_switch
from testbed.experiments.capacity import KEEP_UP, by_majority, highest_held
from testbed.experiments.stamps import SOURCE_PORT, STAMP_COLUMNS, stamped_send
from testbed.rundir import ExperimentDir
from testbed.semantics.cep.lastn import MAX_CEP_WINDOW
from testbed.semantics.cep.oracle import BasicEvent, CepOracle
from testbed.semantics.cep.rules import CepRules
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.strict import EventCount, Rate, Repeats
from testbed.semantics.topology import SPLITTER_IP, Topology, parse_topology

FIG_4 = "p4cep_fig4"
STREAM, SOURCE, COPIES, SINK = 7, SOURCE_PORT, 2, 3
FORWARD, SPLITTER = "forward", "splitter"
#: ``n`` of the two baselines in the raw tables: plain forwarding, and the splitter alone (no CEP).
FORWARD_N, SPLITTER_N = -1, -2
#: Blasts that leave fewer copies than this measure no rate.
MIN_BLAST_COPIES = 200
#: Issue 45's target: the splitter alone at this share of plain forwarding's rate, or more.
SPLITTER_ALONE_TARGET = 0.5
#: bmv2's egress queue depth for these measurements, in packets (its default is 64).
QUEUE_DEPTH = 100_000


class CepParams(KindParams):
    sizes: list[int] = Field(default=[0, 1, 2, 4, 8, 16, 32], min_length=1, description="window sizes n")
    latency_events: EventCount = Field(default=2000, description="events per latency point")
    latency_rate: Rate = Field(default=500, description="events per second (P4CEP: 500 pps)")
    blast_events: EventCount = Field(default=30000, description="events per throughput point")
    blast_rate: Rate = Field(default=100000, description="the blast's send rate: above what the switch takes")
    capacity_events: EventCount = Field(default=40000, description="frames per capacity trial")
    capacity_ceiling: Rate = Field(default=400000, description="the highest rate a capacity trial offers: "
                                   "below what one sending thread reaches")
    capacity_refine: int = Field(default=4, ge=0, le=10,
                                 description="bisection steps of a capacity search after its first rate not held")
    capacity_repeats: int = Field(default=3, ge=1, le=9,
                                  description="trials per rate of a capacity search: the rate holds when most "
                                              "keep up")
    placement: bool = Field(default=True, description="the sender on a CPU of its own, the switch on the others")
    rounds: Repeats = 1
    seed: int = Field(default=4, ge=0)

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, sizes: list[int]) -> list[int]:
        bad = [n for n in sizes if not 0 <= n <= MAX_CEP_WINDOW]
        if bad:
            raise ValueError(f"window size {bad[0]} is outside 0 .. {MAX_CEP_WINDOW}")
        return sizes


def cep_topology(n: int, events: int) -> Topology:
    """One stream from h1 to h2, each event its own window (a copy per event),
    and the pattern on it with a window of ``n`` values and sink h3."""
    window = [{"name": "w", "stream": STREAM, "field": "value", "size": n}] if n else []
    second = "[max(w) >= 0]" if n else "[value >= 0]"
    return parse_topology({
        "name": "p4cep", "hosts": {"h1": {}, "h2": {}, "h3": {}},
        "streams": [{"id": STREAM, "source": "h1", "operators": ["h2"], "events": events, "rate": 1,
                     "window": {"kind": "count", "size": 1, "slide": 1}}],
        "cep": {"windows": window, "complex_events": [
            {"name": "fig4", "id": 1, "stream": STREAM, "pattern": f"[value >= 90]; {second}",
             "returns": "value", "sinks": ["h3"]}]}}, plan_only=True)


def event_frames(topo: Topology, count: int, seed: int) -> tuple[list[bytes], list[BasicEvent]]:
    """``count`` events with values drawn from 0 .. 99, as frames and as the oracle reads them."""
    rng = random.Random(seed)
    plan = SplitterPlan(topo)
    ip, mac = plan.addresses["h1"]
    template = FrameTemplate(mac, SPLITTER_MAC, ip, SPLITTER_IP, STREAM)
    events = [BasicEvent(STREAM, seq, seq, 0, rng.randrange(100)) for seq in range(count)]
    return [template.frame(e.seq, e.ts, e.key, e.value) for e in events], events


def completing(rules: CepRules, events: list[BasicEvent]) -> set[int]:
    """The seqs of the events that complete a match, by the oracle."""
    oracle = CepOracle(rules.window_specs(), rules.pattern_specs())
    return {e.seq for e in events if oracle.step(e)}


@contextmanager
def prepared_switch(target: str, expdir: ExperimentDir, rig: VethRig, name: str, topo: Optional[Topology],
                    rules: Optional[CepRules] = None, window_tests: Optional[dict] = None,
                    placement: Optional[CpuPlacement] = None
                    ) -> Iterator[tuple[Optional[CepControl], Optional[float]]]:
    """``target`` on ``rig``: plain forwarding from port 1 to 2 when ``topo`` is
    None, else ``topo``'s plan and, with ``rules``, the CEP build with them
    installed.  Yields the CEP control plane (None without rules) and how long
    installing the rules took (window and pattern slots, table entries, sinks).
    ``window_tests`` overrides what each window counts (``CepControl.install``).
    bmv2's egress queues are made deep (``QUEUE_DEPTH``), as is any real
    switch's buffer: a blast then loses events only on their way in, before
    the stage, never a copy or a complex event after it.  ``placement``
    puts the switch on its CPUs.  The third value yielded is the switch's
    process id, for ``cpu_seconds``."""
    forward = None if topo is not None else {SOURCE: COPIES}
    # A topology that changes nothing runs on the build without changes, as in a run.
    with live_switch(target, expdir, name, rig, forward=forward, cep=rules is not None,
                     changes=topo is None or topo.changes_streams(),
                     cpus=placement.switch if placement else None) as (proc, api):
        if target == "bmv2":
            api.set_queue_depth(QUEUE_DEPTH)
        control, install_s = None, None
        if topo is not None:
            plan = SplitterPlan(topo)
            Controller(api).install(plan)                   # the plan addresses the sinks too
            if rules is not None:
                control = CepControl(api, {h: plan.ports[h] for h in topo.sink_hosts()})
                started = time.perf_counter()
                control.install(rules, window_tests)
                install_s = time.perf_counter() - started
        yield control, install_s, proc.proc.pid


def through_switch(target: str, expdir: ExperimentDir, rig: VethRig, name: str, frames: list[bytes],
                   rate: float, topo: Optional[Topology], with_cep: bool = True,
                   placement: Optional[CpuPlacement] = None) -> tuple[pd.DataFrame, int, Optional[float]]:
    """``frames`` sent at ``rate`` through ``prepared_switch``: the CEP build with
    ``topo``'s stream and pattern, plain forwarding when ``topo`` is None, or the
    plain build with the splitter alone when ``with_cep`` is false.  Returns the
    taps' rows (``stamps.STAMP_COLUMNS``), the frames the taps' sockets dropped,
    and how long installing the pattern took."""
    rules = topo.cep if topo is not None and with_cep else None
    with prepared_switch(target, expdir, rig, name, topo, rules, placement=placement) as (_control, install_s, _pid):
        rows, drops = sent_through(rig, frames, rate, placement, sink=rules is not None)
        return rows, drops, install_s


def sent_through(rig: VethRig, frames: list[bytes], rate: float, placement: Optional[CpuPlacement],
                 sink: bool = False) -> tuple[pd.DataFrame, int]:
    """``frames`` sent at ``rate`` into the switch running on ``rig``, from the
    sender's CPUs: the taps' rows (``stamps.STAMP_COLUMNS``) on the copies'
    port (and the sink's) and the frames their sockets dropped."""
    rows, drops = stamped_send(rig, frames, rate, {COPIES, SINK} if sink else {COPIES}, placement)
    return pd.DataFrame(rows, columns=STAMP_COLUMNS), drops


def capacity_trial(rows: pd.DataFrame, sent: int, asked: float, tap_drops: int) -> dict[str, Any]:
    """One capacity trial's row: the frames' rate in, the copies' rate out,
    and whether the switch kept up: every frame copied (the taps losing
    none) and the copies leaving at ``KEEP_UP`` of the frames' rate or
    faster.  Frames a queue holds are late, not lost, but a switch slower
    than the frames lets them out slower than they came, over the middle of
    the trial, however deep its queues."""
    ins = rows.loc[rows["direction"] == "in", "ns"]
    outs = rows[(rows["direction"] == "out") & (rows["port"] == COPIES)]
    arrived, left = backlogged_rate(ins), backlogged_rate(outs["ns"])
    copied = int(outs["seq"].nunique())
    return {"asked": asked, "sent": sent, "arrived_per_s": arrived, "copied": copied, "left_per_s": left,
            "tap_drops": tap_drops,
            "kept_up": bool(tap_drops == 0 and copied == sent and left >= KEEP_UP * arrived)}


def capacity_search(target: str, expdir: ExperimentDir, rig: VethRig, name: str, frames: list[bytes],
                    topo: Optional[Topology], start: float, ceiling: float, refine: int,
                    placement: Optional[CpuPlacement], repeats: int = 1) -> list[dict[str, Any]]:
    """Trials of ``frames`` on one switch (plain forwarding when ``topo`` is
    None, else the splitter alone), from ``start`` frames/s, doubling while
    the rate holds and up to ``ceiling``, then ``refine`` bisections
    (``capacity.highest_held``).  A rate holds when most of up to
    ``repeats`` trials at it keep up: near capacity one trial passes or
    fails by a few frames lost to a slow spell of the machine, and a
    majority is less of a coin.  The trials at a rate stop once the
    majority is decided.  Returns every trial's row, in order, each with
    the rate's verdict (``held``) and the switch's CPU seconds over the
    trial (``switch_cpu_s``)."""
    trials: list[dict[str, Any]] = []

    def held(rate: float) -> Optional[dict[str, Any]]:
        def trial(_i: int) -> dict[str, Any]:
            before = cpu_seconds(pid)
            rows, drops = sent_through(rig, frames, rate, placement)
            return {**capacity_trial(rows, len(frames), rate, drops), "switch_cpu_s": cpu_seconds(pid) - before}

        at_rate, verdict = by_majority(trial, repeats, lambda t: t["kept_up"])
        trials.extend({**t, "held": verdict} for t in at_rate)
        return trials[-1] if verdict else None

    with prepared_switch(target, expdir, rig, name, topo, placement=placement) as (_control, _install, pid):
        highest_held(held, start, ceiling, refine)
    return trials


def capacity_of(trials: pd.DataFrame) -> tuple[float, bool, Optional[float]]:
    """A search's capacity: the frames' arrival rate at the highest rate held
    (0 when none was), the lower median of its trials that kept up; whether
    every rate held, so that the ceiling, not the switch, ended the search;
    and the switch's CPU time per frame in those trials, in µs (None where
    the trials did not record it).  A search of one trial per rate (no
    ``held`` column, as the records before the repeats) holds where its
    trial kept up."""
    held = trials["held"] if "held" in trials else trials["kept_up"]
    kept = trials[held & trials["kept_up"]]
    if kept.empty:
        return 0.0, False, None
    top = kept[kept["asked"] == kept["asked"].max()].sort_values("arrived_per_s")
    at = top.iloc[(len(top) - 1) // 2]
    cpu = (float(1e6 * at["switch_cpu_s"] / at["sent"])
           if "switch_cpu_s" in top and pd.notna(at["switch_cpu_s"]) else None)
    return float(at["arrived_per_s"]), bool(held.all()), cpu


def backlogged_rate(out_ns: pd.Series) -> float:
    """Frames per second over the middle 80 % of ``out_ns`` (the switch backlogged, not starting or ending)."""
    t = np.sort(out_ns.to_numpy())
    if len(t) < MIN_BLAST_COPIES:
        return float("nan")
    lo, hi = int(len(t) * 0.1), int(len(t) * 0.9)
    return (hi - lo) / ((t[hi] - t[lo]) / 1e9)


def sender_bound(rate: float, rows: pd.DataFrame, send_rate: float) -> bool:
    """Whether a blast measured the sender rather than the switch: the frames
    arrived slower than asked, or the switch kept up with them.  Such a rate
    is a lower bound of the switch's."""
    ins = np.sort(rows.loc[rows["direction"] == "in", "ns"].to_numpy())
    arrived = (len(ins) - 1) / ((ins[-1] - ins[0]) / 1e9) if len(ins) > 1 and ins[-1] > ins[0] else 0.0
    return bool(arrived < 0.9 * send_rate or rate >= 0.9 * arrived)


def cep_check(rows: pd.DataFrame, rules: CepRules, events: list[BasicEvent]) -> dict[str, int]:
    """Complex events that left against the oracle's, over the events the switch took (those with a copy)."""
    taken = set(rows.loc[(rows["direction"] == "out") & (rows["port"] == COPIES), "seq"])
    want = completing(rules, [e for e in events if e.seq in taken])
    got = rows.loc[(rows["direction"] == "out") & (rows["port"] == SINK), "seq"]
    return {"events_taken": len(taken), "complex_events": int(len(got)), "missing": len(want - set(got)),
            "extra": len(set(got) - want), "twice": int(got.duplicated().sum())}


class CepWindowCost(ExperimentKind):
    """P4CEP Fig. 4: the CEP stage's latency and relative throughput against n, on every target."""

    Params = CepParams
    paper = {"p4cep_fig4": paper.P4CEP_FIG_4}

    def measure(self) -> dict[str, Any]:
        p = self.params
        latency, rates, checks, capacity = [], [], [], []
        placement = CpuPlacement.of_this_process() if p.placement else None
        self.log(f"the switch on CPUs {placement.record()['switch_cpus']}, the sender on "
                 f"{placement.record()['sender_cpus']}" if placement
                 else "switch and sender on the same CPUs" + ("" if not p.placement else ": this process has one"))
        with interruptible(f"{self.spec.name}-{self.expdir.root.name}"), VethRig(3) as rig:
            for target in self.targets():
                for r in range(p.rounds):
                    base = cep_topology(0, p.latency_events)
                    slow, slow_events = event_frames(base, p.latency_events, p.seed + r)
                    fast, fast_events = event_frames(base, p.blast_events, p.seed + 1000 + r)
                    trial_frames, _ = event_frames(base, p.capacity_events, p.seed + 2000 + r)
                    self.log(f"{target}: round {r + 1}/{p.rounds}: plain forwarding, the splitter alone")
                    rate_of = {}
                    for mode, n_code, topo in ((FORWARD, FORWARD_N, None), (SPLITTER, SPLITTER_N, base)):
                        rows, _drops, _ = through_switch(target, self.expdir, rig, f"{target}-{mode}-{r}", slow,
                                                         p.latency_rate, topo, with_cep=False, placement=placement)
                        latency.append(latencies(rows, COPIES).assign(target=target, n=n_code, mode=mode, round=r))
                        blast, drops, _ = through_switch(target, self.expdir, rig, f"{target}-{mode}-blast-{r}",
                                                         fast, p.blast_rate, topo, with_cep=False, placement=placement)
                        copies = blast.loc[(blast["direction"] == "out") & (blast["port"] == COPIES), "ns"]
                        rate_of[mode] = backlogged_rate(copies)
                        rates.append({"target": target, "n": n_code, "mode": mode, "round": r,
                                      "events_per_s": rate_of[mode], "copies": len(copies),
                                      "send_bound": sender_bound(rate_of[mode], blast, p.blast_rate),
                                      "tap_drops": drops})
                        # From the blast's rate, or, if it measured none, the latency
                        # points' rate, which the switch has just kept up with.
                        start = rate_of[mode] if np.isfinite(rate_of[mode]) else p.latency_rate
                        trials = capacity_search(target, self.expdir, rig, f"{target}-{mode}-capacity-{r}",
                                                 trial_frames, topo, min(start, p.capacity_ceiling),
                                                 p.capacity_ceiling,
                                                 p.capacity_refine, placement, p.capacity_repeats)
                        capacity += [{"target": target, "n": n_code, "mode": mode, "round": r, "trial": i, **t}
                                     for i, t in enumerate(trials)]
                        found, _, _ = capacity_of(pd.DataFrame(trials))
                        self.log(f"{target}: round {r + 1}/{p.rounds}: {mode}: kept up with {found:,.0f} "
                                 f"frames/s ({len(trials)} trials)")
                    forward_rate = rate_of[FORWARD]
                    for n in p.sizes:
                        self.log(f"{target}: round {r + 1}/{p.rounds}: n = {n}")
                        topo = cep_topology(n, p.latency_events)
                        rows, drops, install_s = through_switch(target, self.expdir, rig, f"{target}-cep{n}-{r}",
                                                                slow, p.latency_rate, topo, placement=placement)
                        latency.append(latencies(rows, SINK).assign(target=target, n=n, mode="cep", round=r))
                        checks.append({"target": target, "n": n, "round": r, "at": "latency_rate",
                                       "tap_drops": drops, "install_ms": round(1000 * install_s, 3),
                                       **cep_check(rows, topo.cep, slow_events)})
                        rows, drops, _ = through_switch(target, self.expdir, rig, f"{target}-cep{n}-blast-{r}",
                                                        fast, p.blast_rate, topo, placement=placement)
                        copies = rows.loc[(rows["direction"] == "out") & (rows["port"] == COPIES), "ns"]
                        rate = backlogged_rate(copies)
                        rates.append({"target": target, "n": n, "mode": "cep", "round": r, "events_per_s": rate,
                                      "copies": len(copies), "relative": rate / forward_rate,
                                      "send_bound": sender_bound(rate, rows, p.blast_rate), "tap_drops": drops})
                        checks.append({"target": target, "n": n, "round": r, "at": "blast",
                                       "tap_drops": drops, **cep_check(rows, topo.cep, fast_events)})
        table = pd.concat(latency, ignore_index=True)
        table.to_parquet(self.expdir.cep_latency, index=False)
        pd.DataFrame(rates).to_parquet(self.expdir.cep_rates, index=False)
        pd.DataFrame(capacity).to_parquet(self.expdir.cep_capacity, index=False)
        summary = summarize(table, pd.DataFrame(rates), pd.DataFrame(capacity))
        return {"summary": summary, "checks": checks, "targets": targets_met(summary),
                "placement": placement.record() if placement else None,
                "pattern": "[value >= 90]; [max(w) >= 0]  (n = 0: [value >= 90]; [value >= 0])"}

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        """Per window size: the splitter's plan and the pattern's transition table."""
        out = {}
        for n in params.sizes:
            topo = cep_topology(n, params.latency_events)
            machine = topo.cep.automata()[1]
            out[f"n={n}"] = {**SplitterPlan(topo).cost(), "cep_windows": len(topo.cep.windows),
                             "cep_transition_entries": machine.states << len(machine.comparisons)}
        return out

    def ok(self, ours: dict[str, Any]) -> bool:
        """Every point's complex events are exactly the oracle's, none lost by the taps."""
        return bool(ours["checks"]) and all(c["missing"] == 0 and c["extra"] == 0 and c["twice"] == 0
                                            and c["complex_events"] > 0 and c["tap_drops"] == 0
                                            for c in ours["checks"])

    @classmethod
    def doc_table(cls, record: dict[str, Any]) -> list[str]:
        theirs = (record.get("paper") or {}).get("p4cep_fig4") or paper.P4CEP_FIG_4
        ours = record.get("ours") or {}
        table = fig4_table(ours.get("summary") or [], theirs)
        sentence = capacity_sentence(ours.get("summary") or [], ours.get("placement"))
        return table + (["", sentence] if table and sentence else [])

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        capacity = pd.read_parquet(expdir.cep_capacity) if expdir.cep_capacity.exists() else None
        return [draw_fig4(pd.read_parquet(expdir.cep_latency), pd.read_parquet(expdir.cep_rates), capacity,
                          record["paper"]["p4cep_fig4"], expdir.figure(FIG_4))]


def latencies(rows: pd.DataFrame, port: int) -> pd.DataFrame:
    """Per frame out on ``port``: the time from its event's arrival on port 1, in microseconds."""
    ins = rows[rows["direction"] == "in"].drop_duplicates("seq").set_index("seq")["ns"]
    outs = rows[(rows["direction"] == "out") & (rows["port"] == port)]
    return pd.DataFrame({"seq": outs["seq"].to_numpy(),
                         "latency_us": (outs["ns"].to_numpy() - ins.reindex(outs["seq"]).to_numpy()) / 1000})


def summarize(latency: pd.DataFrame, rates: pd.DataFrame,
              capacity: Optional[pd.DataFrame] = None) -> list[dict[str, Any]]:
    """Per target and n (n = -1: plain forwarding, -2: the splitter alone): latency median,
    p99 and mean in µs, samples, and the backlogged rate over the rounds (median, lowest,
    highest) with the median's ratio to plain forwarding and to the splitter alone.
    With ``capacity`` (the trials of ``capacity_search``), the two baselines'
    capacity over the rounds likewise, and the splitter's ratio to forwarding's;
    and where the trials recorded it, the switch's CPU µs per event at the
    capacity (median over the rounds) and forwarding's over the splitter's
    (``per_cpu_of_forward``: its events per CPU second against forwarding's).

    Rounds matter on bmv2, whose blast rates spread by up to a factor of two between
    rounds.  A forwarding blast that was sender-bound measured the sender, so every
    ratio against it is an upper bound (``forward_send_bound``); so is a ratio to a
    forwarding capacity that no trial failed (``forward_at_ceiling``)."""
    found = capacities(capacity) if capacity is not None and len(capacity) else pd.DataFrame()
    out = []
    for (target, n), part in latency.dropna(subset=["latency_us"]).groupby(["target", "n"]):
        us = part["latency_us"].to_numpy()
        mine = rates[(rates["target"] == target) & (rates["n"] == n)]
        rate = mine["events_per_s"].dropna()
        row = {"target": target, "n": int(n), "samples": len(us), "p50_us": float(np.median(us)),
               "p99_us": float(np.percentile(us, 99)), "mean_us": float(us.mean()),
               "rounds": len(rate), "events_per_s": float(rate.median()) if len(rate) else None}
        if len(rate):
            row.update(events_per_s_min=float(rate.min()), events_per_s_max=float(rate.max()),
                       send_bound=bool(mine["send_bound"].any()))
        kept = found[(found["target"] == target) & (found["n"] == n)] if len(found) else found
        if len(kept):
            row.update(capacity_per_s=float(kept["per_s"].median()), capacity_min=float(kept["per_s"].min()),
                       capacity_max=float(kept["per_s"].max()), capacity_at_ceiling=bool(kept["at_ceiling"].any()))
            cpu = kept["cpu_us"].dropna()
            if len(cpu):
                row["cpu_us_per_event"] = float(cpu.median())
        out.append(row)
    forward = {row["target"]: row for row in out if row["n"] == FORWARD_N}
    splitter = {row["target"]: row for row in out if row["n"] == SPLITTER_N}
    for row in out:
        ref, alone = forward.get(row["target"]), splitter.get(row["target"])
        if ref and row["n"] != FORWARD_N and row["events_per_s"] and ref["events_per_s"]:
            row["relative_throughput"] = row["events_per_s"] / ref["events_per_s"]
            row["forward_send_bound"] = ref.get("send_bound", False)
            row["latency_over_forward"] = row["p50_us"] / ref["p50_us"]
        if alone and row["n"] >= 0 and row["events_per_s"] and alone["events_per_s"]:
            row["of_splitter_alone"] = row["events_per_s"] / alone["events_per_s"]
        if ref and row["n"] != FORWARD_N and row.get("capacity_per_s") and ref.get("capacity_per_s"):
            row["capacity_of_forward"] = row["capacity_per_s"] / ref["capacity_per_s"]
            row["forward_at_ceiling"] = ref["capacity_at_ceiling"]
        if ref and row["n"] != FORWARD_N and row.get("cpu_us_per_event") and ref.get("cpu_us_per_event"):
            # events per CPU second, against forwarding's: forwarding's cost over this one's
            row["per_cpu_of_forward"] = ref["cpu_us_per_event"] / row["cpu_us_per_event"]
    return [{k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()} for row in out]


def capacities(trials: pd.DataFrame) -> pd.DataFrame:
    """Per target, n and round: the capacity its search found, and the CPU
    time per frame there (``capacity_of``)."""
    rows = []
    for (target, n, r), part in trials.groupby(["target", "n", "round"]):
        per_s, at_ceiling, cpu_us = capacity_of(part)
        rows.append({"target": target, "n": int(n), "round": int(r), "per_s": per_s, "at_ceiling": at_ceiling,
                     "cpu_us": cpu_us})
    return pd.DataFrame(rows)


def targets_met(summary: list[dict[str, Any]]) -> dict[str, Any]:
    """Issue 22's targets on bmv2: latency at the largest n at most 1.5x that at n = 0,
    and throughput at the largest n at least 80 % of plain forwarding.  Issue 45's:
    the splitter alone keeps up with at least half of plain forwarding's rate."""
    out: dict[str, Any] = {}
    for target in sorted({row["target"] for row in summary}):
        alone = next((row for row in summary if row["target"] == target and row["n"] == SPLITTER_N), {})
        if alone.get("capacity_of_forward") is not None:
            out.setdefault(target, {}).update(
                splitter_alone_capacity_of_forward=alone["capacity_of_forward"],
                splitter_alone_at_least_half=alone["capacity_of_forward"] >= SPLITTER_ALONE_TARGET,
                forward_at_ceiling=alone["forward_at_ceiling"])
        mine = {row["n"]: row for row in summary if row["target"] == target and row["n"] >= 0}
        if 0 not in mine or len(mine) < 2:
            continue
        top = mine[max(mine)]
        growth = top["p50_us"] / mine[0]["p50_us"]
        out.setdefault(target, {}).update(
            largest_n=max(mine), latency_growth=round(growth, 3), latency_within_1_5x=growth <= 1.5,
            relative_throughput_at_largest_n=top.get("relative_throughput"),
            throughput_at_least_80_percent=(top.get("relative_throughput") or 0) >= 0.8)
    return out


def capacity_sentence(summary: list[dict[str, Any]], placement: Optional[dict[str, str]]) -> Optional[str]:
    """Issue 45's target held to each target's capacities, and how they
    compare with the blast's rates, as a sentence; None without a search."""
    rows = {(row["target"], row["n"]): row for row in summary}
    parts = []
    for target in sorted({t for t, _ in rows}):
        alone, forward = rows.get((target, SPLITTER_N), {}), rows.get((target, FORWARD_N), {})
        ratio = alone.get("capacity_of_forward")
        if ratio is None:
            continue
        bound = "at most " if alone.get("forward_at_ceiling") else ""
        blast = alone.get("relative_throughput")
        in_blast = (f" (in a blast, {alone['events_per_s']:,.0f} against {forward['events_per_s']:,.0f}: "
                    f"{blast:.1%})" if blast is not None else "")
        verdict = "met" if ratio >= SPLITTER_ALONE_TARGET and not alone.get("forward_at_ceiling") else "not shown"
        per_cpu = alone.get("per_cpu_of_forward")
        cost = (f", and per event at those rates the switch process used {alone['cpu_us_per_event']:.1f} µs of "
                f"CPU for the splitter alone and {forward['cpu_us_per_event']:.1f} for forwarding: per CPU second, "
                f"the splitter alone took {per_cpu:.1%} of forwarding's events" if per_cpu is not None else "")
        parts.append(f"on {target} the splitter alone kept up with {alone['capacity_per_s']:,.0f} events/s and "
                     f"plain forwarding with {forward['capacity_per_s']:,.0f}: {bound}{ratio:.1%}{in_blast}, "
                     f"so the target is {verdict}{cost}")
    if not parts:
        return None
    where = (f"The switch ran on CPU {placement['switch_cpus']} and the sender on CPU {placement['sender_cpus']}. "
             if placement else "The switch and the sender shared the CPUs. ")
    return (f"{where}Issue 45's target is the splitter alone at {SPLITTER_ALONE_TARGET:.0%} of plain "
            f"forwarding's rate or more, read from the highest rate each kept up with (medians over the "
            f"rounds): " + "; ".join(parts) + ".")


def fig4_table(summary: list[dict[str, Any]], p4cep: dict[str, Any]) -> list[str]:
    """Fig. 4 as a table: per target and n, ours beside P4CEP's bmv2 numbers where it gives one."""
    if not summary:
        return []
    bmv2 = p4cep["bmv2"]

    def theirs(target: str, n: int) -> str:
        if target != "bmv2":
            return ""
        if n == FORWARD_N:
            return f"baseline: {bmv2['baseline_latency_us']} µs, about {bmv2['baseline_pps']:,} packets/s"
        if n == 0:
            return f"{bmv2['latency_us_at_n0']} µs"
        return "over 10 ms" if n > 15 else ""

    def share(value: Any, upper: bool = False) -> str:
        return "" if value is None else f"{'≤ ' if upper else ''}{100 * value:.1f} %"

    def rate(row: dict[str, Any]) -> str:
        if row.get("events_per_s") is None:
            return ""
        spread = (f" ({row['events_per_s_min']:,.0f}–{row['events_per_s_max']:,.0f})"
                  if row.get("rounds", 0) > 1 else "")
        return f"{row['events_per_s']:,.0f}{spread}"

    def kept_up(row: dict[str, Any]) -> str:
        if row.get("capacity_per_s") is None:
            return ""
        spread = (f" ({row['capacity_min']:,.0f}–{row['capacity_max']:,.0f})"
                  if row.get("rounds", 0) > 1 else "")
        ratio = row.get("capacity_of_forward")
        of = f", {share(ratio, bool(row.get('forward_at_ceiling')))} of forwarding" if ratio is not None else ""
        return f"{'≥ ' if row.get('capacity_at_ceiling') else ''}{row['capacity_per_s']:,.0f}{spread}{of}"

    names = {FORWARD_N: "plain forwarding", SPLITTER_N: "the splitter alone"}
    out = ["Fig. 4, ours beside P4CEP's bmv2 numbers:", "",
           "| target | n | latency median, µs | p99, µs | events/s in a blast: median (lowest–highest) "
           "| of plain forwarding | of the splitter alone | kept up with, events/s | P4CEP on bmv2 (paper) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for row in sorted(summary, key=lambda r: (r["target"], r["n"])):
        out.append(f"| {row['target']} | {names.get(row['n'], row['n'])} | {row['p50_us']:.0f} | "
                   f"{row['p99_us']:.0f} | {rate(row)} | "
                   f"{share(row.get('relative_throughput'), bool(row.get('forward_send_bound')))} | "
                   f"{share(row.get('of_splitter_alone'))} | {kept_up(row)} | {theirs(row['target'], row['n'])} |")
    rounds = max(int(row.get("rounds") or 0) for row in summary)
    over = f"Rates are the median over {rounds} rounds of blasts. " if rounds > 1 else ""
    return out + ["", over + "'≤' marks a ratio to a forwarding blast that the sender bounded: the "
                  "switch may forward faster than measured, so the share is at most that. 'Kept up with' is "
                  "the highest rate at which the switch copied every frame and let the copies out as fast as "
                  "they came, in most of the trials at it (a capacity search, for the two baselines; '≥' where "
                  "the sender's highest rate was kept up with); issue 45's target reads the splitter alone's "
                  "share of it."]


def draw_fig4(latency: pd.DataFrame, rates: pd.DataFrame, capacity: Optional[pd.DataFrame],
              p4cep: dict[str, Any], out: Path) -> Path:
    """Left: latency (median, p99 bar) against n per target, plain forwarding dashed, and
    P4CEP's bmv2 numbers.  Right: throughput relative to plain forwarding on the same target
    (median over the rounds, bar from the lowest round to the highest), with P4CEP's NFP-C
    (relative to line rate) for orientation; the splitter alone's capacity, of
    forwarding's, where the run searched for it."""
    rows = pd.DataFrame(summarize(latency, rates, capacity))
    fig, (lat, thr) = plt.subplots(1, 2, figsize=(12, 6.5))
    for i, target in enumerate(sorted(rows["target"].unique()) if len(rows) else []):
        part = rows[(rows["target"] == target) & (rows["n"] >= 0)].sort_values("n")
        lat.errorbar(part["n"], part["p50_us"], yerr=[np.zeros(len(part)), part["p99_us"] - part["p50_us"]],
                     marker="o", color=f"C{i}", capsize=2, label=f"ours, {target}: median (bar to p99)")
        fwd = rows[(rows["target"] == target) & (rows["n"] == FORWARD_N)]
        if len(fwd):
            lat.axhline(float(fwd["p50_us"].iloc[0]), ls="--", lw=1, color=f"C{i}",
                        label=f"{target}: plain forwarding, median")
        alone = rows[(rows["target"] == target) & (rows["n"] == SPLITTER_N)]
        if "relative_throughput" in part and len(fwd):
            # The bar spans the rounds' lowest to highest rate, against forwarding's median.
            per = 100 / float(fwd["events_per_s"].iloc[0])
            mid = per * part["events_per_s"]
            bound = " (at most: forwarding sender-bound)" if bool(fwd["send_bound"].iloc[0]) else ""
            below = np.clip(mid - per * part["events_per_s_min"], 0, None)   # 0 for one round, not -0.0001
            above = np.clip(per * part["events_per_s_max"] - mid, 0, None)
            thr.errorbar(part["n"], mid, yerr=[below, above],
                         marker="o", color=f"C{i}", capsize=2,
                         label=f"ours, {target}: splitter + CEP{bound}, "
                               f"median of {int(part['rounds'].max())} rounds (bar: lowest to highest)")
            if len(alone) and "relative_throughput" in alone:
                thr.axhline(100 * float(alone["relative_throughput"].iloc[0]), ls="-.", lw=1, color=f"C{i}",
                            label=f"{target}: the splitter alone, of plain forwarding")
            if len(alone) and "capacity_of_forward" in alone and pd.notna(alone["capacity_of_forward"].iloc[0]):
                thr.axhline(100 * float(alone["capacity_of_forward"].iloc[0]), ls=(0, (1, 3)), lw=1.5,
                            color=f"C{i}", label=f"{target}: the splitter alone kept up with, of plain forwarding")
    bmv2 = p4cep["bmv2"]
    lat.scatter([0], [bmv2["latency_us_at_n0"]], marker="s", color="black", zorder=3,
                label=f"P4CEP bmv2 (paper): {bmv2['latency_us_at_n0']} us at n = 0")
    lat.axhline(bmv2["baseline_latency_us"], ls=":", color="black", lw=1,
                label=f"P4CEP bmv2 baseline (paper): {bmv2['baseline_latency_us']} us")
    lat.scatter([16], [10_000], marker="^", color="black", label="P4CEP bmv2 (paper): over 10 ms for n > 15")
    lat.set(yscale="log", xlabel="window size n (values)", ylabel="latency (us)",
            title="event in to complex event out")
    lat.grid(alpha=0.3, which="both")
    lat.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    nfp = p4cep["nfp_c"]["relative_throughput_percent_n0_to_n20"]
    thr.plot([0, 20], nfp, ls=":", color="black", label="P4CEP NFP-C (paper): of line rate, n = 0 and 20")
    thr.axhline(80, color="grey", lw=0.8, ls="--", label="issue 22's target on bmv2: 80 %")
    thr.axhline(50, color="grey", lw=0.8, ls=(0, (5, 5)), label="issue 45's target for the splitter alone: 50 %")
    thr.set(xlabel="window size n (values)", ylabel="throughput (%)", ylim=(0, 110),
            title="throughput (ours: of plain forwarding)")
    thr.grid(alpha=0.3)
    thr.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    fig.suptitle("P4CEP Fig. 4-like: one pattern of two basic events against the window size, both targets",
                 fontsize=10)
    return save_figure(fig, out)
