"""How stable an experiment's verdicts are: the experiment run R times, each verdict counted.

A verdict is any ``ok`` an experiment records: the experiment's own, and
every ``ok`` inside its numbers (``ours``), such as each scenario run's
check; for a single scenario, every ``ok`` of its verdicts.json.
``repeat_experiment`` runs the experiment into ``repeat-1`` ..
``repeat-R`` under one folder and writes ``stability.json`` and
``stability.md`` beside them: per verdict, how many of the R runs passed.
A verdict that passed in some runs and not in others is *flaky*; that is
what a user's CI would trip over.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from testbed.rundir import ExperimentDir, RunDir, read_json


def verdict_leaves(record: dict[str, Any]) -> dict[str, bool]:
    """Every ``ok`` an experiment.json (or a run's verdicts.json) holds, by its
    dotted path: ``ok`` for the whole, ``ours.runs.cbsw1.ok`` for a scenario
    run of an experiment, ``check.291.ok`` for a stream of a run."""
    def walk(value: Any, path: str) -> Iterator[tuple[str, bool]]:
        if isinstance(value, dict):
            for key, item in value.items():
                where = f"{path}.{key}" if path else str(key)
                if key == "ok" and isinstance(item, bool):
                    yield where, item
                else:
                    yield from walk(item, where)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from walk(item, f"{path}[{i}]")

    return dict(walk(record, ""))


def outcome(out: Path) -> dict[str, Any]:
    """What a repetition left in ``out``: its experiment.json, or for a single
    scenario its verdicts.json (``{}`` if it left neither)."""
    experiment = read_json(ExperimentDir(out).record)
    return experiment if experiment else read_json(RunDir(out).verdicts)


@dataclass
class Stability:
    """Per verdict, its outcome in each repetition (None where a run did not reach it)."""

    experiment: str
    runs: list[dict[str, bool]] = field(default_factory=list)
    errors: list[Optional[str]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def add(self, verdicts: dict[str, bool], error: Optional[str], seconds: float) -> None:
        self.runs.append(verdicts)
        self.errors.append(error)
        self.seconds.append(seconds)

    def table(self) -> list[dict[str, Any]]:
        names = list(dict.fromkeys(name for run in self.runs for name in run))
        rows = []
        for name in names:
            outcomes = [run.get(name) for run in self.runs]
            passed = sum(1 for o in outcomes if o is True)
            rows.append({"verdict": name, "passed": passed, "of": len(outcomes),
                         "stable": passed in (0, len(outcomes)) and None not in outcomes,
                         "outcomes": outcomes})
        return rows

    @property
    def ok(self) -> bool:
        """Every verdict passed in every repetition, and none ended in an error."""
        return bool(self.runs) and not any(self.errors) and all(
            row["passed"] == row["of"] for row in self.table())

    def as_json(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "repetitions": len(self.runs), "ok": self.ok,
                "errors": self.errors, "seconds": [round(s, 1) for s in self.seconds], "verdicts": self.table()}

    def markdown(self) -> str:
        lines = [f"# {self.experiment}: {len(self.runs)} repetitions", "",
                 "| verdict | passed | stable |", "|---|---|---|"]
        for row in self.table():
            lines.append(f"| `{row['verdict']}` | {row['passed']} of {row['of']} | "
                         f"{'yes' if row['stable'] else 'FLAKY' if 0 < row['passed'] else 'fails every time'} |")
        errors = [f"- repetition {i + 1}: {e}" for i, e in enumerate(self.errors) if e]
        if errors:
            lines += ["", "Repetitions that ended in an error:", *errors]
        return "\n".join(lines) + "\n"


def repeat_experiment(name: str, times: int, folder: Path,
                      run_once: Callable[[Path], Any], fatal: tuple[type[BaseException], ...] = (),
                      progress: Callable[[str], None] = lambda line: None) -> Stability:
    """Run an experiment ``times`` times into ``folder/repeat-<i>``, with
    ``run_once(out)``; write and return its stability.  A repetition that
    raises is counted as an error and the next one runs, unless what it
    raised is ``fatal`` (an interrupt, input that can never run)."""
    folder.mkdir(parents=True, exist_ok=True)
    stability = Stability(name)
    for i in range(1, times + 1):
        out = folder / f"repeat-{i}"
        started = time.monotonic()
        error = None
        try:
            run_once(out)
        except (KeyboardInterrupt, SystemExit, *fatal):
            raise
        except Exception as err:           # noqa: BLE001 - a failed repetition is a data point
            error = f"{type(err).__name__}: {' '.join(str(err).split())}"
        record = outcome(out)
        stability.add(verdict_leaves(record), error or record.get("error"), time.monotonic() - started)
        passed = sum(stability.runs[-1].values())
        progress(f"{name}: repetition {i} of {times}: {passed} of {len(stability.runs[-1])} verdicts passed"
                 + (f"; {stability.errors[-1]}" if stability.errors[-1] else ""))
        write(stability, folder)
    return stability


def write(stability: Stability, folder: Path) -> None:
    (folder / "stability.json").write_text(json.dumps(stability.as_json(), indent=2))
    (folder / "stability.md").write_text(stability.markdown())
