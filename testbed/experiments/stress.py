"""The test suite, the shipped scenarios and experiments, repeated on a busy machine (``make stress``).

A verdict that depends on how busy the machine is fails a user's CI at
random.  ``stress`` loads every core to a fraction with ``stress-ng`` (from
Debian), then runs the test suite ``suite_runs`` times, each shipped
scenario ``repeat`` times (``testbed experiment NAME --repeat R``) and each
experiment asked for as often, and writes one stability table to
``results/stress/<id>/``: per test-suite run its counts and failed tests,
per scenario or experiment verdict how many repetitions passed.  The load
stops with the command, however it ends.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from testbed import ROOT
from testbed.experiments.repeat import Stability

#: The shipped scenarios of S4 and P4SS (``topologies/``) that ``make stress`` repeats.
SCENARIOS = ("cbtw1", "cbtw2", "cbsw1", "cbsw2", "tbtw1", "tbtw2", "tbsw1", "tbsw2", "p4ss")
#: pytest's last line: "3 failed, 530 passed, 25 skipped in 812.40s".
_SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")
_FAILED = re.compile(r"^FAILED (\S+)", re.MULTILINE)


def stress_ng_missing() -> Optional[str]:
    return None if shutil.which("stress-ng") else "stress-ng is not installed (Debian package stress-ng)"


class CpuLoad:
    """``stress-ng`` keeping ``workers`` cores busy ``percent`` of the time, in its own
    process group so that stopping it leaves nothing behind."""

    def __init__(self, workers: int, percent: int):
        self.workers = workers
        self.percent = percent
        self.proc: Optional[subprocess.Popen] = None

    def __enter__(self) -> "CpuLoad":
        self.proc = subprocess.Popen(["stress-ng", "--cpu", str(self.workers), "--cpu-load", str(self.percent),
                                      "--quiet"], start_new_session=True, stdout=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@dataclass
class SuiteRun:
    """One run of the test suite: pytest's counts, the tests that failed, how long it took."""

    counts: dict[str, int]
    failed: list[str]
    seconds: float
    exit_code: int

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def parse_pytest(output: str) -> tuple[dict[str, int], list[str]]:
    """pytest's final counts and the ids of its failed tests, from ``-ra`` output."""
    tail = output.strip().splitlines()[-1] if output.strip() else ""
    counts = {("errors" if kind.startswith("error") else kind): int(n) for n, kind in _SUMMARY.findall(tail)}
    return counts, _FAILED.findall(output)


def run_suite(args: list[str], log: Path) -> SuiteRun:
    """One run of the suite, in a process group of its own: if this one is
    interrupted, the suite and whatever its tests started are stopped too."""
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pytest", "-ra", "-q", "-p", "no:cacheprovider", *args],
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait()
        except BaseException:
            stop_group(proc)
            raise
    counts, failed = parse_pytest(log.read_text(errors="replace"))
    return SuiteRun(counts, failed, time.monotonic() - started, proc.returncode)


def stop_group(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """Stop the suite: SIGINT to pytest first, which then tears its fixtures
    down (the switches and namespaces its tests started, in sessions of their
    own); then SIGTERM to its process group, then SIGKILL."""
    steps = ((lambda sig: os.kill(proc.pid, sig), signal.SIGINT, grace_s),
             (lambda sig: os.killpg(proc.pid, sig), signal.SIGTERM, 10.0),
             (lambda sig: os.killpg(proc.pid, sig), signal.SIGKILL, 5.0))
    for send, sig, wait_s in steps:
        try:
            send(sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; give the rest of its group the same grace
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _group_alive(proc.pid):
            time.sleep(0.1)
        if not _group_alive(proc.pid):
            return


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@dataclass
class StressReport:
    """What ``stress`` measured: the load, the suite's runs, each scenario's stability."""

    load: dict[str, Any]
    suite: list[SuiteRun] = field(default_factory=list)
    scenarios: dict[str, Stability] = field(default_factory=dict)
    experiments: dict[str, Stability] = field(default_factory=dict)
    #: What was stressed: the code's revision, the scenarios' target (None: each topology's own), Spark,
    #: and whether the experiments ran at their small size (``quick``).
    setup: dict[str, Any] = field(default_factory=dict)

    def markdown(self) -> str:
        lines = [f"# Stability under load ({self.load['workers']} stress-ng CPU workers at {self.load['percent']} %)",
                 ""]
        if self.setup:
            lines += [setup_line(self.setup), ""]
        if self.suite:
            passed = sum(r.ok for r in self.suite)
            lines += [f"## Test suite: passed {passed} of {len(self.suite)} runs", "",
                      "| run | passed | failed | skipped | minutes | failed tests |", "|---|---|---|---|---|---|"]
            for i, r in enumerate(self.suite, 1):
                failed = r.counts.get("failed", 0) + r.counts.get("errors", 0)
                lines.append(f"| {i} | {r.counts.get('passed', 0)} | {failed} | {r.counts.get('skipped', 0)} "
                             f"| {r.seconds / 60:.1f} | {', '.join(r.failed) or '-'} |")
            lines.append("")
        for title, what, repeated in (("Scenarios", "scenario", self.scenarios),
                                      ("Experiments", "experiment", self.experiments)):
            if not repeated:
                continue
            lines += [f"## {title}", "", f"| {what} | verdict | passed | stable |", "|---|---|---|---|"]
            for name, stability in repeated.items():
                for row in stability.table():
                    lines.append(f"| {name} | `{row['verdict']}` | {row['passed']} of {row['of']} | "
                                 f"{'yes' if row['stable'] else 'FLAKY' if row['passed'] else 'fails every time'} |")
                lines += [f"| {name} | repetition {i} ended in an error | | {error} |"
                          for i, error in enumerate(stability.errors, 1) if error]
            lines.append("")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {"load": self.load, "setup": self.setup,
                "suite": [{"counts": r.counts, "failed": r.failed, "seconds": round(r.seconds, 1), "ok": r.ok}
                          for r in self.suite],
                "scenarios": {name: s.as_json() for name, s in self.scenarios.items()},
                "experiments": {name: s.as_json() for name, s in self.experiments.items()}}

    @property
    def ok(self) -> bool:
        return (all(r.ok for r in self.suite) and all(s.ok for s in self.scenarios.values())
                and all(s.ok for s in self.experiments.values()))


def setup_line(setup: dict[str, Any]) -> str:
    """``revision …; scenarios on …, Spark on|off``, as the report heads its tables."""
    target = setup.get("target") or "each topology's own target"
    size = "; experiments at their small size (--quick)" if setup.get("quick") else ""
    return (f"Revision {str(setup.get('revision', '?'))[:12]}; scenarios on {target}, "
            f"Spark {'on' if setup.get('spark') else 'off'}{size}.")


def stress(folder: Path, suite_runs: int, repeat: int, scenarios: list[str], pytest_args: list[str],
           percent: int, repeat_scenario: Callable[[str, int, Path], Stability],
           progress: Callable[[str], None], setup: Optional[dict[str, Any]] = None,
           experiments: Sequence[str] = (),
           repeat_experiment: Optional[Callable[[str, int, Path], Stability]] = None) -> StressReport:
    """Load the machine, then run the suite, the scenarios and the experiments;
    the report is rewritten after every step, so an interrupted stress run
    keeps what it measured.  ``setup``: what is stressed (``StressReport.setup``).
    Experiment ``name`` repeats into ``folder/experiment-<name>``, apart from
    a scenario of the same name."""
    if experiments and repeat_experiment is None:
        raise ValueError("experiments to repeat, and nothing to repeat them with")
    folder.mkdir(parents=True, exist_ok=True)
    workers = os.cpu_count() or 1
    report = StressReport({"workers": workers, "percent": percent, "tool": "stress-ng",
                           "started": time.time()}, setup=dict(setup or {}))
    with CpuLoad(workers, percent):
        for i in range(1, suite_runs + 1):
            progress(f"test suite, run {i} of {suite_runs} (log: {folder / f'suite-{i}.log'})")
            report.suite.append(run_suite(pytest_args, folder / f"suite-{i}.log"))
            progress(f"test suite, run {i}: {report.suite[-1].counts}")
            _write(report, folder)
        for name in scenarios:
            report.scenarios[name] = repeat_scenario(name, repeat, folder / name)
            _write(report, folder)
        for name in experiments:
            report.experiments[name] = repeat_experiment(name, repeat, folder / f"experiment-{name}")
            _write(report, folder)
    return report


def _write(report: StressReport, folder: Path) -> None:
    (folder / "stability.json").write_text(json.dumps(report.as_json(), indent=2))
    (folder / "stability.md").write_text(report.markdown())
