"""Each target's per-event costs held against the previous bench on this machine.

A slowdown of the oracle, of the embedded target's pipeline, or of either
target's switch process (bmv2's included) should show up in the next
``make bench``, with the commit it was measured against.  The switches'
cost is their time per copy at a rate where no queue forms (the
``late_in_switch`` part), turned into a rate: copies per second, one at a
time, ``1e6 / median microseconds``.  bmv2's instructions per event (the
``instructions`` part) become events per billion instructions; they repeat
to about 0.1 % whatever the machine's load, so they are held to a far closer
tolerance.
Every bench records its rates (events, decisions or frames per second) and
its git revision; the next one finds the newest earlier bench of the same
results folder whose record has them, and writes per rate the ratio now /
then.  A ratio under ``1 - TOLERANCE`` is named *slower*.  Timings on a
shared machine vary, so a slowdown is reported, never a failed check.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Optional

from testbed.rundir import ExperimentDir, read_json

#: The rate columns of the in-process parts' rows.
RATE_KEYS = ("events_per_s", "decisions_per_s", "frames_per_s")
PARTS = ("oracle", "pipeline", "lateness")
#: The part that times each target's switch per copy, and its median column.
IN_SWITCH, IN_SWITCH_US = "late_in_switch", "us_p50"
#: Below this share of the baseline's rate a rate counts as slower.
TOLERANCE = 0.2
#: The part that counts bmv2's instructions per event, and its tolerance.
INSTRUCTIONS, INSTRUCTION_TOLERANCE = "instructions", 0.02


def rates(ours: dict[str, Any]) -> dict[str, float]:
    """``part: row label: column`` -> rate, for every rate the parts measured."""
    out = {}
    for part in PARTS:
        rows = ours.get(part)
        for row in [rows] if isinstance(rows, dict) else rows or []:
            label = row.get("spec") or row.get("event") or ""
            for key in RATE_KEYS:
                if isinstance(row.get(key), (int, float)):
                    out[f"{part}: {label}: {key}"] = float(row[key])
    for row in ours.get(IN_SWITCH) or []:
        us = row.get(IN_SWITCH_US)
        if isinstance(us, (int, float)) and us > 0:
            out[f"{IN_SWITCH}: {row['target']}, {row['event']}: copies_per_s"] = 1e6 / us
    for row in ours.get(INSTRUCTIONS) or []:
        per_event = row.get("instructions_per_event")
        if isinstance(per_event, (int, float)) and per_event > 0:
            out[f"{INSTRUCTIONS}: {row['target']} {row['program']}, {row['workload']}: events_per_ginstr"] = \
                1e9 / per_event
    return out


def tolerance(rate: str) -> float:
    """How far under the baseline ``rate`` may fall before it counts as slower."""
    return INSTRUCTION_TOLERANCE if rate.startswith(f"{INSTRUCTIONS}:") else TOLERANCE


def earlier_benches(folder: Path, now: ExperimentDir) -> Iterator[tuple[ExperimentDir, dict[str, Any]]]:
    """Bench results in ``folder`` before ``now``, newest first, with their records."""
    for path in sorted((p for p in folder.iterdir() if p.is_dir()), reverse=True) if folder.is_dir() else []:
        expdir = ExperimentDir(path)
        if expdir.root == now.root or not expdir.record.is_file():
            continue
        yield expdir, read_json(expdir.record)


def against_baseline(ours: dict[str, Any], now: ExperimentDir) -> Optional[dict[str, Any]]:
    """This bench's rates against the newest earlier one that measured any of
    them; ``None`` when there is none (the first bench on this machine)."""
    current = rates(ours)
    if not current:
        return None
    for expdir, record in earlier_benches(now.root.parent, now):
        before = rates(record.get("ours") or {})
        common = [key for key in current if key in before and before[key] > 0]
        if not common:
            continue
        rows = [{"rate": key, "now": round(current[key], 1), "baseline": round(before[key], 1),
                 "ratio": round(current[key] / before[key], 3), "tolerance": tolerance(key)} for key in common]
        return {"baseline": str(expdir.root), "baseline_revision": record.get("git_revision"),
                "tolerance": TOLERANCE, "rates": rows,
                "slower": [r["rate"] for r in rows if r["ratio"] < 1 - r["tolerance"]]}
    return None
