"""``testbed compare RUN_A RUN_B``: where two runs differ, stream by stream.

Two runs of the same seeded scenario must agree on every event whatever
the target (``model`` or ``bmv2``), and a change to the P4 program shows up
as the events, operator sets or windows it changed.  Per stream it compares:

- the stream's definition (window, operators, events, ...), from ``run.json``;
- the events sent, by ``seq``: present in both, same ``ts``, ``key`` and ``value``;
- per event, the operators that received it, copies counted (a duplicate is a difference);
- the windows, by (window, key): same operator, event count and result
  (``check.compare_windows``; a NaN result equals nothing), when both runs
  computed windows.  A run whose record says its Spark application finished
  and whose windows are gone is refused, not compared as a run without Spark.

Times (send, receive, completion) always differ between runs and are not
compared.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pandas as pd

from testbed.analysis.check import RUN_TABLES, WindowCheck, compare_windows, promised_but_missing, unequal
from testbed.rundir import RunDir, RunRecord

EXAMPLES = 5
#: How window differences are worded: B's side, A's side, only in A, only in B.
WINDOW_LABELS = ("B", "A", "only in A", "only in B")


@dataclass
class StreamDiff:
    """How one stream differs between run A and run B."""

    stream: int
    definition: list[str] = field(default_factory=list)   # fields of the stream that differ
    events: int = 0              # events (seq) both runs sent
    only_a: int = 0
    only_b: int = 0
    content: int = 0             # same seq, other ts/key/value
    copies: tuple[int, int] = (0, 0)
    operator_sets: int = 0       # events both sent whose receivers differ
    windows: Optional[WindowCheck] = None
    windows_note: str = ""       # why windows were not compared
    examples: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        windows_same = self.windows is None or (self.windows.matching == self.windows.reference
                                                == self.windows.produced)
        return not (self.definition or self.only_a or self.only_b or self.content or self.operator_sets
                    or self.copies[0] != self.copies[1]) and windows_same

    def as_json(self) -> dict[str, Any]:
        out = {"same": self.same, "definition": self.definition, "events": self.events, "only_a": self.only_a,
               "only_b": self.only_b, "content": self.content, "copies": list(self.copies),
               "operator_sets": self.operator_sets, "examples": self.examples}
        out["windows"] = self.windows.as_json() if self.windows is not None else self.windows_note
        return out


def _definition(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [f"{name}: A {a.get(name)} B {b.get(name)}" for name in sorted(set(a) | set(b))
            if a.get(name) != b.get(name)]


def _events(diff: StreamDiff, a: pd.DataFrame, b: pd.DataFrame) -> pd.Index:
    """Sent events by seq; returns the seqs both runs sent."""
    # Nullable integers, so the outer merge keeps them integers.
    a, b = a.astype("Int64"), b.astype("Int64")
    merged = a.merge(b, on="seq", how="outer", suffixes=("_a", "_b"), indicator=True)
    both = merged[merged["_merge"] == "both"]
    diff.events = len(both)
    diff.only_a = int((merged["_merge"] == "left_only").sum())
    diff.only_b = int((merged["_merge"] == "right_only").sum())
    other = both[unequal(both["ts_a"], both["ts_b"]) | unequal(both["key_a"], both["key_b"])
                 | unequal(both["value_a"], both["value_b"])]
    diff.content = len(other)
    for _, row in merged[merged["_merge"] != "both"].head(EXAMPLES).iterrows():
        diff.examples.append(f"seq {row['seq']}: sent only in {'A' if row['_merge'] == 'left_only' else 'B'}")
    for _, row in other.head(EXAMPLES).iterrows():
        diff.examples.append(f"seq {row['seq']}: A (ts {row['ts_a']}, key {row['key_a']}, value {row['value_a']}) "
                             f"B (ts {row['ts_b']}, key {row['key_b']}, value {row['value_b']})")
    return pd.Index(both["seq"])


def _receivers(deliveries: pd.DataFrame, seqs: pd.Index) -> pd.Series:
    """seq -> sorted tuple of the operators that received it (a duplicate appears twice)."""
    got = deliveries[deliveries["seq"].isin(seqs)].sort_values("operator")
    sets = got.groupby("seq")["operator"].agg(tuple)
    return sets.reindex(seqs, fill_value=())


def _deliveries(diff: StreamDiff, a: pd.DataFrame, b: pd.DataFrame, seqs: pd.Index) -> None:
    diff.copies = (len(a), len(b))
    ra, rb = _receivers(a, seqs), _receivers(b, seqs)
    differ = ra[ra != rb]
    diff.operator_sets = len(differ)
    for seq, ops in differ.head(EXAMPLES).items():
        diff.examples.append(f"seq {seq}: A {', '.join(ops) or 'nobody'}  B {', '.join(rb[seq]) or 'nobody'}")


def _windows(rundir: RunDir, record: RunRecord) -> tuple[Optional[pd.DataFrame], str]:
    """The run's windows, or why it has none; ``RunDirError`` when its record
    says the Spark application wrote them and they are gone."""
    if rundir.windows.exists():
        return pd.read_parquet(rundir.windows), ""
    if record.spark_computed():
        raise promised_but_missing(rundir.windows)
    if record.spark_failed() is not None:
        return None, "its Spark application failed"
    return None, "run without Spark" if not record.spark_started() else "it ended before its Spark application finished"


def compare_runs(a: RunDir, b: RunDir) -> dict[int, StreamDiff]:
    """Every stream of either run, with how it differs."""
    records = {"a": a.require(RUN_TABLES), "b": b.require(RUN_TABLES)}
    frames, why_not = {}, {}
    for side, rundir in (("a", a), ("b", b)):
        windows, why_not[side] = _windows(rundir, records[side])
        frames[side] = {"sources": pd.read_parquet(rundir.sources), "deliveries": pd.read_parquet(rundir.deliveries),
                        "windows": windows}
    streams_a, streams_b = records["a"].streams, records["b"].streams
    out: dict[int, StreamDiff] = {}
    for sid in sorted({int(s) for s in streams_a} | {int(s) for s in streams_b}):
        diff = StreamDiff(sid, _definition(streams_a.get(str(sid), {}), streams_b.get(str(sid), {})))
        part = {side: {name: None if df is None else df[df["stream"] == sid] for name, df in f.items()}
                for side, f in frames.items()}
        columns = ["seq", "ts", "key", "value"]
        seqs = _events(diff, part["a"]["sources"][columns], part["b"]["sources"][columns])
        _deliveries(diff, part["a"]["deliveries"], part["b"]["deliveries"], seqs)
        missing = [side for side in ("a", "b") if part[side]["windows"] is None]
        if missing:
            diff.windows_note = "not compared: " + "; ".join(f"no windows in {side.upper()} ({why_not[side]})"
                                                             for side in missing)
        else:
            checks = compare_windows(part["b"]["windows"], part["a"]["windows"], labels=WINDOW_LABELS)
            diff.windows = checks.get(sid, WindowCheck(sid))
            diff.examples += diff.windows.examples
        out[sid] = diff
    return out


def diff_lines(diffs: dict[int, StreamDiff]) -> list[str]:
    lines = []
    for sid, d in diffs.items():
        if d.windows is None:
            windows = f"windows {d.windows_note}"
        else:
            w = d.windows
            windows = (f"windows A {w.reference} B {w.produced}, {w.mismatched + w.incomplete} differ, "
                       f"{w.missing} only in A, {w.extra} only in B")
        lines.append(f"stream {sid}: {'same   ' if d.same else 'DIFFERS'} events {d.events} "
                     f"({d.only_a} only in A, {d.only_b} only in B, {d.content} with other content); "
                     f"copies A {d.copies[0]} B {d.copies[1]}; operator sets differ for {d.operator_sets} events; "
                     f"{windows}")
        lines += [f"    {line}" for line in d.definition + d.examples]
    return lines
