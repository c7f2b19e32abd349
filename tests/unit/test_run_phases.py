"""``Run`` over fake parts: its phases, its record and its clean-up, without root.

The network, switch and Spark are fakes (``support.fake_parts``); the host
programs are real processes standing in for sources and receivers, and the
conclusion is the real analysis, so what is judged here is the run's own
work: the order of the phases, what it writes, and that it leaves nothing.
"""
import signal
import threading

import pytest
from rich.console import Console

from support import topologies
from support.fake_parts import FailingSpark, fake_parts
from support.records import written
from testbed.emulation import procs
from testbed.runs.orchestrator import PreflightError, Run, RunError, RunOptions
from testbed.runs.signals import RunInterrupted
from testbed.semantics.topology import load_topology

pytestmark = pytest.mark.unit


@pytest.fixture
def topology(tmp_path):
    data = topologies.topology_data(
        [topologies.stream(3, {"kind": "count", "size": 3, "slide": 1}, ["h2", "h3", "h4"], events=60)], 4)
    path = topologies.write(tmp_path / "t.yaml", data)
    return path, load_topology(path)


def run_with(topology, tmp_path, spark=None, **options):
    path, topo = topology
    console = Console(stderr=True, quiet=True)
    parts, networks = fake_parts(console, spark)
    run = Run(topo, path, RunOptions(target="model", out=tmp_path / "run", spark=spark is not None, **options),
              parts, console)
    return run, networks


def test_the_phases_run_in_order_and_the_run_passes(topology, tmp_path):
    run, networks = run_with(topology, tmp_path)
    assert run.execute() is True
    record = written(run.rundir)
    assert list(record["phases_s"]) == ["network", "plan", "operators", "stream", "conclude"]
    assert record["ok"] and record["stream_end"] == "complete" and record["end"] >= record["start"]
    assert record["switch"]["streams"]["3"]["in"] == 60 and record["install"]["groups"] > 0
    assert record["accounting"]["streams"]["3"]["lost"] == 0 and record["expected_deliveries"] > 60
    (network,) = networks
    assert network.events == ["build", "start", "stop"]
    assert sorted(network.started) == [("receiver", "h2"), ("receiver", "h3"), ("receiver", "h4"),
                                       ("source", "h1")]
    assert run.rundir.figure("load").exists()
    assert procs.live_runs() == [] and not list(procs.state_dir().glob("*.json"))


def test_a_spark_application_that_fails_leaves_the_deliveries_judged(topology, tmp_path):
    run, _ = run_with(topology, tmp_path, spark=lambda topo, run_id, rundir: FailingSpark())
    assert run.execute() is False
    record = written(run.rundir)
    assert record["spark"] == {"error": "no Spark here (a fake that fails)", "computed": False}
    assert record["check"]["3"]["ok"] and "Spark application failed" in record["windows_not_computed"]
    assert "spark" not in record["phases_s"]


def test_a_dead_source_ends_the_run_and_everything_is_stopped(topology, tmp_path, monkeypatch):
    run, networks = run_with(topology, tmp_path)

    def start_sources_then_fail(self):
        raise RunError("source on h1 exited with code 3 during the stream")

    monkeypatch.setattr("testbed.runs.hosts.HostProcesses.start_sources", start_sources_then_fail)
    with pytest.raises(RunError, match="source on h1"):
        run.execute()
    record = written(run.rundir)
    assert record["error"].startswith("RunError: source on h1") and "conclude" not in record["phases_s"]
    assert networks[0].events[-1] == "stop"
    assert procs.live_runs() == []


def test_sigterm_in_the_stream_stops_the_run_and_cleans_up(topology, tmp_path, monkeypatch):
    run, networks = run_with(topology, tmp_path)

    def stream_then_signal(self):
        threading.Timer(0.2, signal.raise_signal, (signal.SIGTERM,)).start()
        threading.Event().wait(5)

    monkeypatch.setattr(Run, "stream", stream_then_signal)
    with pytest.raises(RunInterrupted):
        run.execute()
    record = written(run.rundir)
    assert record["signals"] == ["SIGTERM"] and record["error"] == "RunInterrupted: SIGTERM"
    assert networks[0].events[-1] == "stop" and procs.live_runs() == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_missing_parts_are_refused_before_anything_starts(topology, tmp_path):
    run, networks = run_with(topology, tmp_path)
    run.parts.missing = lambda: "cannot run: no switch in this test"
    with pytest.raises(PreflightError, match="no switch in this test"):
        run.execute()
    assert networks == [] and not run.rundir.root.exists()


def test_a_failed_link_goes_down_through_the_network(topology, tmp_path):
    from support.fake_parts import FakeNetwork

    run, _ = run_with(topology, tmp_path)
    run.network = FakeNetwork(run.topo, run.rundir)
    run.fail_operator("h3", "link")
    run.recover_operator("h3", "link")
    assert run.network.events == ["down h3", "up h3"]


def test_a_run_this_machine_cannot_hold_is_refused_at_preflight(topology, tmp_path, monkeypatch):
    """Validation is a function of the file; the machine's memory is the run's preflight."""
    from click.testing import CliRunner

    from testbed.cli import main

    monkeypatch.setattr("testbed.runs.orchestrator.available_memory", lambda: 1 << 20)
    assert CliRunner().invoke(main, ["validate", str(topology[0])]).exit_code == 0
    run, networks = run_with(topology, tmp_path)
    with pytest.raises(PreflightError, match=r"t.yaml: streams\[0\].events: the run would need about"):
        run.execute()
    assert networks == [] and not run.rundir.root.exists()
