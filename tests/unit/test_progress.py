"""Progress where the output is no terminal: plain lines, never cut bars (issue 44)."""
from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from testbed.runs.progress import PlainProgress, StreamWatch

pytestmark = pytest.mark.unit


class Finished:
    returncode = 0

    def poll(self):
        return 0


def test_a_run_followed_into_a_log_prints_plain_lines(rundir):
    for host, sent in (("h1", 1200), ("h2", 800)):
        rundir.source_status(host).parent.mkdir(parents=True, exist_ok=True)
        rundir.source_status(host).write_text(json.dumps({"sent": {"1": sent}, "final": True}))
    for host in ("h3", "h4"):
        rundir.receiver_status(host).write_text(json.dumps({"received": 3000}))
    log = io.StringIO()
    console = Console(file=log, width=40)          # a file: no terminal, and narrow
    watch = StreamWatch(rundir, {"h1": Finished(), "h2": Finished()}, {"h3": Finished(), "h4": Finished()},
                        total_events=2000, expected_copies=6000, timeout_s=5)
    assert watch.follow(console) == "complete"
    text = log.getvalue()
    assert "━" not in text and "…" not in text
    assert "events sent 2,000/2,000 · deliveries received 6,000/6,000" in text


def test_plain_lines_come_at_a_modest_rate():
    now = [0.0]
    log = io.StringIO()
    progress = PlainProgress(Console(file=log), every_s=5, clock=lambda: now[0])
    with progress:
        task = progress.add_task("events sent", total=100)
        for i in range(1, 101):                    # 100 updates over 20 s
            now[0] = i * 0.2
            progress.update(task, completed=i)
    lines = log.getvalue().splitlines()
    assert 4 <= len(lines) <= 6                    # about one per 5 s, and the last
    assert lines[-1].endswith("events sent 100/100")
