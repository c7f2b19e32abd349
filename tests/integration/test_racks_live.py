"""Racks live: operators behind Linux bridges below the splitter (root and Mininet needed).

Each rack is one splitter port; the splitter tells its hosts apart by the MAC
the egress rewrite gives each copy, and the bridge's static entries deliver
a copy to that host alone.  A bridge that flooded would still pass the
check (a host's kernel drops datagrams for another's IP), so the hosts' own
interface counters are what show that nothing reached the wrong host.
"""
import os
import signal
from pathlib import Path

import pandas as pd
import pytest
import yaml

from support.runs import finished_run, kill_watchdogs, new_tag, nothing_left, run_cli, start_run, state_files, wait_for
from testbed import ROOT
from testbed.emulation.footprint import tagged_processes
from testbed.emulation.network import mininet_missing
from testbed.rundir import RunDir
from testbed.semantics.instances import host_of

pytestmark = pytest.mark.mininet
MISSING = mininet_missing()
needs_mininet = pytest.mark.skipif(MISSING is not None, reason=f"emulation skipped: {MISSING}")
RACKS = ROOT / "topologies" / "racks.yaml"
#: Frames a host's link end may see besides its copies: 2 were seen on every
#: host, racked or not, on this machine.  A flooding bridge would add the rest
#: of the rack's copies, hundreds.
CHATTER = 4


@needs_mininet
@pytest.mark.parametrize("target", ["model", pytest.param("bmv2", marks=pytest.mark.bmv2)])
def test_racked_operators_pass_check_and_each_host_sees_only_its_own_copies(tmp_path, target):
    """Neither the P4 program nor the model changed for racks: a racked host is
    reached as a shared host's instance is, and both targets must agree on it."""
    if target == "bmv2":
        from testbed.targets.bmv2.toolchain import toolchain_missing
        if toolchain_missing():
            pytest.skip(f"bmv2 toolchain: {toolchain_missing()}")
    out = tmp_path / "run"
    run = finished_run(RACKS, out, target)            # succeeded, and nothing of it is left
    assert run["target"] == target
    assert run["ok"] is True
    acct = run["accounting"]["streams"]["1"]
    assert acct["sent"] == 1400 and acct["lost"] == 0 and acct["lost_on_link"] == 0
    delivered = pd.read_parquet(RunDir(out).deliveries)
    assert len(delivered) == run["expected_deliveries"] == acct["switch_copies_out"]
    per_host = delivered["operator"].map(host_of).value_counts().to_dict()
    assert set(per_host) == {"h2", "h3", "h4", "h5", "h6", "h7", "h8"}
    assert sorted(delivered.loc[delivered["operator"].map(host_of) == "h6", "operator"].unique()) == \
        ["h6.0", "h6.1", "h6.2", "h6.3"]
    hosts = run["path"]["hosts"]
    for host, copies in per_host.items():
        assert copies <= hosts[host]["rx_packets"] <= copies + CHATTER, (host, copies, hosts[host])
    # One splitter port per rack: the switch's copies out of it are its hosts' together.
    ports = run["switch_ports"]
    assert ports["h2"] == ports["h3"] == ports["h4"] != ports["h5"] == ports["h6"] == ports["h7"]
    counted = run["switch"]["ports"]
    assert counted[str(ports["h2"])] == sum(per_host[h] for h in ("h2", "h3", "h4"))
    assert counted[str(ports["h5"])] == sum(per_host[h] for h in ("h5", "h6", "h7"))
    assert counted[str(ports["h8"])] == per_host["h8"]
    assert run["accounting"]["where_lost"]["operators"] == {}
    # Each rack's bridge counters are recorded: its uplink took in the port's copies.
    bridges = run["path"]["racks"]
    assert set(bridges) == {"r1", "r2"} and all(len(ports) == 4 for ports in bridges.values())
    for rack, first in (("r1", "h2"), ("r2", "h5")):
        assert bridges[rack][f"{rack}-eth0"]["rx_packets"] >= counted[str(ports[first])]
    chk = run_cli("check", str(out))
    assert chk.returncode == 0 and "OK" in chk.stdout and "lost in or after" not in chk.stdout


def long_racks(tmp_path, switch: str):
    """racks.yaml sending long enough to be stopped mid-stream, on a switch of its own name."""
    data = yaml.safe_load(RACKS.read_text())
    data["switch"]["name"] = switch
    data["streams"][0].update(events=20000, rate=1000)
    path = tmp_path / "racks.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def start_long_racks(tmp_path, switch: str):
    """``long_racks`` started with a fresh tag, once its source is sending: the run and its tag."""
    out = tmp_path / "run"
    tag = new_tag()
    proc = start_run(str(long_racks(tmp_path, switch)), "--out", str(out), "--no-spark", tag=tag)
    wait_for(RunDir(out).source_status("h1").exists, 60, "the source to start")
    return proc, tag


@needs_mininet
def test_an_interrupted_racked_run_leaves_nothing(tmp_path):
    proc, tag = start_long_racks(tmp_path, "rk4")
    assert any("mininet rack" in info.get("what", "") for info in recorded(state_files()).values())
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    nothing_left(tag)


@needs_mininet
def test_clean_ends_a_crashed_racked_run(tmp_path):
    proc, tag = start_long_racks(tmp_path, "rk5")
    kill_watchdogs(tag)          # a crash that takes the watchdog along: only `testbed clean` is left
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    racks = [int(pid) for pid, info in recorded(state_files()).items() if info["what"].startswith("mininet rack")]
    # Each rack's bridge lives in its node's namespace, held by the node's shell alone
    # (that shell may already have ended with its parent's pipe): ending it removes the bridge.
    assert len(racks) == 2
    res = run_cli("clean")
    assert res.returncode == 0 and "ended pid" in res.stdout
    assert all(ended(pid) for pid in racks)
    nothing_left(tag)


def ended(pid: int) -> bool:
    """``pid`` is gone, or a zombie that its new parent (PID 1 after the crash) has
    not reaped yet: a zombie has already left its namespaces, so its bridge is gone."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def recorded(paths) -> dict:
    """Every recorded process of the state files ``paths``, ``pid -> info``."""
    import json

    out: dict = {}
    for path in paths:
        out.update(json.loads(path.read_text()).get("pids", {}))
    return out


@needs_mininet
def test_the_watchdog_ends_a_sigkilled_racked_run(tmp_path):
    proc, tag = start_long_racks(tmp_path, "rk6")
    os.kill(proc.pid, signal.SIGKILL)            # the run's watchdog sees its lifeline break and cleans
    proc.communicate()
    wait_for(lambda: not tagged_processes(tag) and not state_files(), 60, "the watchdog to clean the run")
    nothing_left(tag)
