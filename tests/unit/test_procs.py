"""Host processes' signal handling (testbed.emulation.procs)."""
import json
import os
import signal

from testbed.emulation import procs
from testbed.emulation.procs import run_until_signalled


class Worker:
    """Stops at the first SIGTERM, as a receiver does."""

    def __init__(self):
        self.stopping = False
        self.loops = 0

    def run(self):
        os.kill(os.getpid(), signal.SIGTERM)
        while not self.stopping:
            self.loops += 1


def test_a_worker_stops_at_sigterm_and_a_late_one_cannot_kill_it():
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        worker = Worker()
        run_until_signalled(worker)
        assert worker.stopping
        # its data is written: a second SIGTERM (the stopper's) during shutdown is ignored,
        # where Python's default handler would end the process with -15
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGTERM)
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def test_a_process_owned_by_its_own_state_file_outlives_the_run_that_started_it(tmp_path):
    """``owned_by`` records a process apart from the current run: the run's
    state file ends clean, the owner's stays while the process lives (so
    ``testbed clean`` can find it), and goes once it is stopped."""
    import subprocess

    procs.begin_run("run-1")
    run_file = procs.state_dir() / "run-1.json"
    with procs.owned_by("service-1", "a warm service"):
        proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
        procs.register_pid(proc.pid, "sleep")
    procs.set_phase("stream")                      # the run's own file is current again
    assert json.loads(run_file.read_text())["phase"] == "stream"
    assert procs.end_run() == [] and not run_file.exists()
    owner = json.loads((procs.state_dir() / "service-1.json").read_text())
    assert list(owner["pids"]) == [str(proc.pid)] and owner["owner"] == os.getpid()
    with procs.owned_by("service-1", "a warm service"):
        procs.stop_group(proc, grace=2)
    assert not (procs.state_dir() / "service-1.json").exists()
