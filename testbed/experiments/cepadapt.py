"""Patterns installed, replaced and removed while events flow, held to the CEP oracle (issue 22).

The switch runs on veth pairs, as for ``cep`` (P4CEP Fig. 4): port 1 takes
one stream's events, port 2 gets a copy of each, port 3 is the sink.  The
changes are a topology's ``schedule:`` ``cep:`` entries (docs/cep.md,
"Changing rules mid-stream"), validated as any topology's: slots counted by
what is installed at once, each change's slot assigned in order.  The stream
goes in parts; between two parts the control plane applies the changes
whose point is there (``CepControl.apply``), and the sender waits until the
switch has passed every event before it on, so the change's boundary is
exactly its point: the oracle applies the same change at the same event.
Every complex event the sink gets must be the oracle's under the rule set in
force, in order; the record keeps each change's boundary and how long it
took to install.
"""
from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import Field, model_validator

from testbed.analysis.plots import plt, save_figure
from testbed.dataplane.cep import CepControl
from testbed.dataplane.wire import (
    EVENT_OFFSET,
    EVENT_STRUCT,
    FrameTemplate,
    is_complex_events_frame,
    is_event_frame,
    parse_complex_events,
)
from testbed.emulation.source import SPLITTER_MAC
from testbed.emulation.veth import Taps, VethRig, send_frames
from testbed.experiments import paper
from testbed.experiments.base import ExperimentKind, KindParams, interruptible
from testbed.experiments.cep import prepared_switch
from testbed.rundir import ExperimentDir
from testbed.semantics.cep.automaton import compile_pattern
from testbed.semantics.cep.changes import TimedChange, apply_to_oracle
from testbed.semantics.cep.lastn import in_type
from testbed.semantics.cep.oracle import BasicEvent, CepOracle
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.strict import EventCount, Rate
from testbed.semantics.topology import SPLITTER_IP, Topology, TopologyError, parse_topology

FIGURE = "cepadapt"
STREAM, SOURCE, COPIES, SINK = 7, 1, 2, 3
#: Issue 22's target for installing a pattern, on either target.
INSTALL_TARGET_MS = 50.0
#: How long the sender waits, at most, for the switch to pass a part's events on.
SETTLE_S = 10.0


def _entry(after: int, **cep: Any) -> dict[str, Any]:
    return {"after": {"stream": STREAM, "events": after}, "cep": cep}


class CepAdaptParams(KindParams):
    """The stream, the rules in force at its start, and the changes: schedule entries
    in a topology's syntax (``{after: {stream, events}, cep: {add | replace | remove |
    add_window | replace_window | remove_window}}``)."""

    events: EventCount = 3000
    rate: Rate = 1000
    seed: int = Field(default=5, ge=0)
    windows: list[dict[str, Any]] = [{"name": "w", "stream": STREAM, "field": "value", "size": 8}]
    patterns: list[dict[str, Any]] = [
        {"name": "high", "id": 1, "stream": STREAM, "pattern": "[value >= 90]; [sum(w) > 400]", "returns": "sum(w)",
         "sinks": ["h3"]}]
    schedule: list[dict[str, Any]] = [
        _entry(600, add={"name": "dip", "id": 2, "stream": STREAM, "strategy": "strict", "sinks": ["h3"],
                         "pattern": "([value < 10] || [min(w) >= 40]); [value < 20]", "returns": "min(w)"}),
        _entry(1200, replace={"name": "high", "id": 1, "stream": STREAM, "pattern": "[value >= 80] && [max(w) >= 95]",
                              "returns": "max(w)", "sinks": ["h3"]}),
        _entry(1800, remove=2),
        _entry(2400, add={"name": "pair", "id": 3, "stream": STREAM, "pattern": "[value == 50]; [value == 51]",
                          "returns": "seq", "sinks": ["h3"]}),
    ]

    @model_validator(mode="after")
    def _a_valid_topology(self):
        # The changes are validated as any topology's schedule: one line naming the entry's field.
        try:
            adapt_topology(self)
        except TopologyError as err:
            raise ValueError(str(err).removeprefix("cepadapt: ")) from None
        return self


def adapt_topology(p: "CepAdaptParams") -> Topology:
    """The stream, its copy port, the rules in force at the start and the schedule's changes."""
    return parse_topology({
        "name": "cepadapt", "hosts": {"h1": {}, "h2": {}, "h3": {}},
        "streams": [{"id": STREAM, "source": "h1", "operators": ["h2"], "events": p.events, "rate": p.rate,
                     "window": {"kind": "count", "size": 1, "slide": 1}}],
        "cep": {"windows": p.windows, "complex_events": p.patterns}, "schedule": p.schedule},
        "cepadapt", plan_only=True)


class CepAdaptation(ExperimentKind):
    """A schedule of pattern changes mid-stream, on every target, against the oracle."""

    Params = CepAdaptParams
    paper = {"p4cep_rule_changes": paper.P4CEP_RULE_CHANGES}

    def measure(self) -> dict[str, Any]:
        p = self.params
        topo = adapt_topology(p)
        plan = SplitterPlan(topo)
        ip, mac = plan.addresses["h1"]
        template = FrameTemplate(mac, SPLITTER_MAC, ip, SPLITTER_IP, STREAM)
        rng = random.Random(p.seed)
        events = [BasicEvent(STREAM, seq, seq, 0, rng.randrange(100)) for seq in range(p.events)]
        rows, changes, checks = [], [], []
        with interruptible(f"{self.spec.name}-{self.expdir.root.name}"), VethRig(3) as rig:
            for target in self.targets():
                self.log(f"{target}: {len(p.schedule)} changes over {p.events} events")
                got, timed, taken, tap_drops = self.through(target, rig, topo, template, events)
                want = oracle_events(topo, [e for e in events if e.seq in taken])
                rows.append(pd.DataFrame(got + want).assign(target=target))
                changes += [{"target": target, **c} for c in timed]
                got_events = [tuple(r[k] for k in ("pattern", "match", "seq", "value")) for r in got]
                want_events = [tuple(r[k] for k in ("pattern", "match", "seq", "value")) for r in want]
                checks.append({"target": target, "complex_events": len(got_events), "expected": len(want_events),
                               "same": got_events == want_events, "events_taken": len(taken),
                               "lost_before_switch": len(events) - len(taken), "tap_drops": tap_drops,
                               "first_difference": first_difference(got_events, want_events)})
        table = pd.concat(rows, ignore_index=True)
        table.to_parquet(self.expdir.cep_changes_events, index=False)
        pd.DataFrame(changes).to_parquet(self.expdir.cep_changes, index=False)
        installs = [c["install_ms"] for c in changes if c["action"] != "remove"]
        return {"checks": checks, "changes": changes,
                "install_ms_max": max(installs) if installs else None,
                "install_within_50_ms": bool(installs) and max(installs) < INSTALL_TARGET_MS}

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        """The splitter's plan, and each pattern's transition table, of every rule the schedule installs
        (a replaced id: its largest definition)."""
        topo = adapt_topology(params)
        entries: dict[str, int] = {}
        for rule in topo.cep_rules_ever():
            machine = compile_pattern(rule.parsed, rule.strategy)
            key = f"cep_transition_entries_pattern_{rule.id}"
            entries[key] = max(entries.get(key, 0), machine.states << len(machine.comparisons))
        return {"cepadapt": {**SplitterPlan(topo).cost(), **entries}}

    def ok(self, ours: dict[str, Any]) -> bool:
        """Every target's complex events are the oracle's over the events it took, in
        order, and there are some; the taps missed nothing, so "taken" is exact."""
        return bool(ours["checks"]) and all(c["same"] and c["complex_events"] > 0 and c["tap_drops"] == 0
                                            for c in ours["checks"])

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        return [draw(pd.read_parquet(expdir.cep_changes_events), pd.read_parquet(expdir.cep_changes),
                     expdir.figure(FIGURE))]

    def through(self, target: str, rig: VethRig, topo: Topology, template: FrameTemplate,
                events: list[BasicEvent]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], set[int], int]:
        """The stream through ``target`` in parts, one change between each two: the
        complex events the sink got, each change as applied, the seqs of the events
        the switch took (each has its copy on port 2), and the frames the taps dropped."""
        p = self.params
        timeline = topo.cep_timeline()
        # Each window counts, from the start, the comparison any pattern of the schedule reads of it.
        with prepared_switch(target, self.expdir, rig, f"{target}-cepadapt", topo, topo.cep,
                             timeline.tests()) as (control, _install, _pid):
            taps = Taps({("out", COPIES): rig.switch_ends[COPIES], ("out", SINK): rig.switch_ends[SINK]},
                        rig.namespace.path)
            try:
                got, applied, sent = [], [], 0
                for change in [*timeline.changes, None]:       # in the order validation gave them slots
                    until = change.after if change is not None else len(events)
                    if until > sent:
                        part = [template.frame(e.seq, e.ts, e.key, e.value) for e in events[sent:until]]
                        send_frames(rig.host_ends[SOURCE], part, p.rate)
                        sent = until
                        settle(taps, sent)
                    if change is not None:
                        applied.append(apply(control, change))
                taps.drain(0.3)
                taken = set()
                for port, frame in taps.rows:
                    if port == COPIES and is_event_frame(frame):
                        taken.add(EVENT_STRUCT.unpack_from(frame, EVENT_OFFSET)[2])
                    elif port == SINK and is_complex_events_frame(frame):
                        for pattern, match, _stream, seq, _ts, value in parse_complex_events(frame[EVENT_OFFSET:]):
                            got.append({"source": "switch", "pattern": pattern, "match": match, "seq": seq,
                                        "value": value})
                return got, applied, taken, taps.kernel_drops
            finally:
                taps.close()


def settle(taps: Taps, events: int, quiet_s: float = 0.5) -> None:
    """Wait until the switch has passed ``events`` events on (their copies seen on
    port 2), or nothing more has come for ``quiet_s``: events lost on the way in
    never come, and the check runs the oracle over the ones that did."""
    deadline = time.monotonic() + SETTLE_S
    seen, last_change = -1, time.monotonic()
    while time.monotonic() < deadline:
        taps.drain(0.05)
        copies = sum(1 for port, frame in taps.rows if port == COPIES and is_event_frame(frame))
        if copies >= events:
            return
        if copies != seen:
            seen, last_change = copies, time.monotonic()
        elif time.monotonic() - last_change >= quiet_s:
            return


def apply(control: CepControl, change: TimedChange) -> dict[str, Any]:
    """One change, timed; its boundary is the first event after its point."""
    started = time.perf_counter()
    control.apply(change)
    took = time.perf_counter() - started
    target = change.rule.id if change.rule is not None else change.pattern_id or change.window_name
    return {"action": change.kind, "pattern": str(target), "slot": change.slot, "boundary": change.after,
            "install_ms": round(1000 * took, 3)}


def oracle_events(topo: Topology, events: list[BasicEvent]) -> list[dict[str, Any]]:
    """The oracle's complex events over ``events`` (those the switch took; seq is the
    send position), each change applied before the first of them at or past its point,
    into the slot validation gave it, so each event's complex events come in the
    order the switch sends them."""
    oracle = CepOracle(topo.cep.window_specs(), topo.cep.pattern_specs())
    pending = list(topo.cep_timeline().changes)
    out = []
    for e in events:
        while pending and pending[0].after <= e.seq:
            apply_to_oracle(oracle, pending.pop(0))
        for c in oracle.step(e):
            out.append({"source": "oracle", "pattern": c.pattern, "match": c.match, "seq": c.seq,
                        "value": in_type(c.value, "value")})
    return out


def first_difference(got: list[tuple], want: list[tuple]) -> Any:
    for i, (a, b) in enumerate(zip(got, want)):
        if a != b:
            return {"index": i, "switch": list(a), "oracle": list(b)}
    return None if len(got) == len(want) else {"index": min(len(got), len(want))}


def draw(events: pd.DataFrame, changes: pd.DataFrame, out: Path) -> Path:
    """Per target: each complex event at its completing event (switch dots, oracle rings),
    the changes' boundaries as lines labelled with their install time."""
    targets = sorted(events["target"].unique())
    fig, axes = plt.subplots(len(targets), 1, figsize=(12, 2.6 * len(targets)), squeeze=False)
    for ax, target in zip(axes[:, 0], targets):
        mine = events[events["target"] == target]
        sw, orc = mine[mine["source"] == "switch"], mine[mine["source"] == "oracle"]
        ax.scatter(orc["seq"], orc["pattern"], s=40, facecolors="none", edgecolors="C1", label="oracle")
        ax.scatter(sw["seq"], sw["pattern"], s=8, color="C0", label="switch")
        for c in changes[changes["target"] == target].itertuples():
            ax.axvline(c.boundary, color="grey", lw=0.8, ls="--")
            ax.annotate(f" {c.action} {c.pattern}, {c.install_ms:.1f} ms", xy=(c.boundary, 0.98), fontsize=7,
                        xycoords=("data", "axes fraction"), va="top")
        ax.set(ylabel="pattern id", title=f"{target}: complex events against the event that completed them")
        ax.set_yticks(sorted(mine["pattern"].unique()))
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("event (seq)")
    fig.suptitle("cepadapt: patterns installed, replaced and removed mid-stream; boundaries dashed", fontsize=10)
    return save_figure(fig, out)
