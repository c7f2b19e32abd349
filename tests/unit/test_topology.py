"""Topology files: the nine scenarios load; bad files fail with one clear line."""
import json
import subprocess
import sys

import pytest
import yaml

from support.topologies import edited
from testbed import ROOT
from testbed.semantics.topology import TopologyError, load_topology

SCENARIOS = ["cbtw1", "cbtw2", "cbsw1", "cbsw2", "tbtw1", "tbtw2", "tbsw1", "tbsw2", "p4ss"]
GOOD = {
    "name": "t", "hosts": {"h1": {}, "h2": {}, "h3": {}},
    "streams": [{"id": 1, "source": "h1", "window": {"kind": "count", "size": 3, "slide": 1},
                 "operators": ["h2", "h3"], "events": 10, "rate": 100}],
}


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "testbed.cli", *args], cwd=ROOT,
                          capture_output=True, text=True)


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenarios_have_twenty_windows_per_operator(name):
    topo = load_topology(ROOT / "topologies" / f"{name}.yaml")
    for s in topo.streams:
        w = s.window
        span = s.events if w.kind == "count" else s.events * s.timestamps.step
        full_windows = (span - w.size) // w.slide + 1
        assert full_windows // len(s.operators) >= 20, (name, s.id)


def mutate(path, value):
    return edited(GOOD, path, value)


BAD = [
    (("streams", 0, "window", "size"), 0, "streams[0].window.size: Input should be greater than 0"),
    (("streams", 0, "operators", 1), "h9", "streams[0].operators[1]: unknown host 'h9'"),
    (("streams", 0, "operators"), [], "streams[0].operators: List should have at least 1 item"),
    (("streams", 0, "source"), "nohost", "streams[0].source: unknown host 'nohost'"),
    (("streams", 0, "window", "kind"), "session", "streams[0].window.kind: Input should be 'count' or 'time'"),
    (("hosts",), {"H-1": {}}, "hosts.H-1: 'H-1' is not a valid name"),
    (("streams", 0, "rate"), KeyError, "streams[0].rate: Field required"),
    (("streams", 0, "speed"), 3, "streams[0].speed: unknown field"),
    (("streams", 0, "operators"), ["h2", "h2"], "streams[0].operators: operator hosts listed twice: h2"),
    (("streams", 0, "window", "lateness"), 2, "streams[0].window: lateness is only meaningful for time windows"),
    (("streams", 0, "window"), {"kind": "time", "size": 10, "slide": 5, "lateness": 21},
     "streams[0].window.lateness: 21 exceeds what the splitter supports, 4 slides (20)"),
    (("streams", 0, "window"), {"kind": "time", "size": 10, "slide": 5, "lateness": -1},
     "streams[0].window.lateness: Input should be greater than or equal to 0"),
    # S4's window-start rule (docs/windows.md, "Where windows start"): what it cannot be combined with
    (("streams", 0, "window"), {"kind": "time", "size": 10, "slide": 5, "lateness": 5, "starts": "event"},
     "streams[0].window.lateness: starts: event takes no lateness"),
    (("streams", 0, "window"), {"kind": "count", "size": 3, "slide": 1, "starts": "event"},
     "streams[0].window.starts: only time windows can start at events"),
    (("streams", 0, "window"), {"kind": "time", "size": 9, "slide": 2, "starts": "event"},
     "streams[0].window.size: starts: event lets at most 4 windows hold an event"),
    (("streams", 0, "window"), {"kind": "time", "size": 9, "slide": 3, "starts": "sometimes"},
     "streams[0].window.starts: Input should be 'grid' or 'event'"),
    (("streams", 0), {**GOOD["streams"][0], "window": {"kind": "time", "size": 9, "slide": 3, "starts": "event"},
                      "batch": {"events": 4, "max_delay": 0.01}},
     "streams[0].batch: starts: event takes events one to a frame"),
]


@pytest.mark.parametrize("path,value,message", BAD)
def test_bad_topology_one_line_error(tmp_path, path, value, message):
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(mutate(path, value)))
    with pytest.raises(TopologyError) as err:
        load_topology(f)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(f"{f}: ")
    assert message in text


def test_duplicate_stream_id(tmp_path):
    data = mutate(("streams",), GOOD["streams"] * 2)
    f = tmp_path / "dup.yaml"
    f.write_text(yaml.safe_dump(data))
    with pytest.raises(TopologyError, match=r"streams\[1\]\.id: duplicate stream id 1 \(also streams\[0\]\)"):
        load_topology(f)


def test_cli_bad_file_exits_2_with_one_line(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(mutate(("streams", 0, "window", "slide"), -1)))
    res = run_cli("plan", str(f))
    assert res.returncode == 2
    assert res.stdout == ""
    assert res.stderr.strip().count("\n") == 0
    assert "streams[0].window.slide" in res.stderr and str(f) in res.stderr


def test_cli_not_yaml(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text("streams: [unclosed\n")
    res = run_cli("validate", str(f))
    assert res.returncode == 2 and "not valid YAML" in res.stderr


@pytest.mark.parametrize("name", SCENARIOS)
def test_cli_plan_json_for_every_scenario(name):
    res = run_cli("plan", name, "--json", "--events", "7")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    topo = load_topology(ROOT / "topologies" / f"{name}.yaml")
    assert set(doc["streams"]) == {str(s.id) for s in topo.streams}
    for s in topo.streams:
        st = doc["streams"][str(s.id)]
        assert st["window"] == {"kind": s.window.kind, "size": s.window.size, "slide": s.window.slide,
                                "origin": s.window.origin, "lateness": 0, "starts": "grid"}
        assert st["operators"] == s.operators
        assert len(st["events"]) == 7
        assert st["events"][0]["operators"] == [s.operators[0]]
        assert set(st["tables"]) >= {"window_spec", "operator_count", "unicast"}
        sliding = s.window.size > s.window.slide
        assert bool(st["multicast_groups"]) == sliding


@pytest.mark.parametrize("name, build", [("cbsw1", "splitter_fixed"), ("s4adapt", "splitter"),
                                         ("batched", "splitter_batches")])
def test_cli_plan_says_which_entries_bmv2s_build_takes(name, build):
    """The plan fills every build's tables, and no build holds them all: the
    cost is given for the build the topology runs on, and the rest named apart."""
    from testbed.dataplane.contract import build_tables

    doc = json.loads(run_cli("plan", name, "--json", "--events", "1").stdout)
    bmv2 = doc["bmv2"]
    assert bmv2["build"] == build
    assert {**bmv2["cost"], **bmv2["not_held"]} == doc["cost"] and not set(bmv2["cost"]) & set(bmv2["not_held"])
    assert set(bmv2["not_held"]) == set(doc["cost"]) - build_tables(build) - {
        "multicast_groups", "multicast_ports", "multicast_nodes"}
    assert ("operator_back" in bmv2["cost"]) == (build == "splitter_fixed") != ("operator_position" in bmv2["cost"])
    text = run_cli("plan", name, "-k", "1").stdout
    assert f"cost on bmv2 (build {build}): window_spec=" in text
    assert (f"no table of {build}" in text) == bool(bmv2["not_held"])


def test_cli_plan_table_output_cbsw1():
    res = run_cli("plan", "cbsw1", "-k", "6")
    assert res.returncode == 0
    assert "set_count_window" in res.stdout and "multicast groups" in res.stdout


def test_replay_csv_is_the_stream(tmp_path):
    from testbed.semantics.workload import stream_events
    (tmp_path / "bids.csv").write_text("time,price,bidder\n" + "".join(
        f"{10 * i},{100 + i}.4,{i % 7}\n" for i in range(50)))
    data = json.loads(json.dumps(GOOD))
    data["streams"][0].update(events=40, replay={"path": "bids.csv", "ts": "time", "value": "price",
                                                 "key": "bidder"})
    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump(data))
    topo = load_topology(f)
    assert topo.streams[0].replay.path == str(tmp_path / "bids.csv")
    ev = stream_events(topo.streams[0], topo.seed)
    assert ev["seq"].tolist() == list(range(40))
    assert ev["ts"].tolist()[:3] == [0, 10, 20] and ev["value"].tolist()[:2] == [100, 101]
    assert ev["key"].tolist()[:8] == [0, 1, 2, 3, 4, 5, 6, 0]


def test_replay_names_missing_column(tmp_path):
    (tmp_path / "x.csv").write_text("t,v\n1,2\n")
    data = json.loads(json.dumps(GOOD))
    data["streams"][0]["replay"] = {"path": "x.csv", "ts": "t", "value": "price"}
    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump(data))
    with pytest.raises(TopologyError, match=r"streams\[0\]\.replay\.value: no column 'price' in x\.csv"):
        load_topology(f)
