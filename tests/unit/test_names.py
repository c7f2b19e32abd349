"""Names that reach a command line or a path: shell metacharacters and ``..`` are refused
everywhere a user can give one, before anything starts (issue 46, "No shell, no escape").

Each input is tried with the same hostile names: the two from the issue (a command
substitution that creates a file, and a history expansion), the other characters a
shell reads, and the names that climb out of a folder.
"""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from support import topologies
from testbed import ROOT
from testbed.cli import main
from testbed.emulation.network import SplitterNetwork
from testbed.experiments.base import EXPERIMENTS_DIR, ExperimentError, Settings, load_experiment
from testbed.experiments.shipped import check_scenarios
from testbed.rundir import ExperimentDir, RunDir
from testbed.rundir.names import UnsafeName, node_name, path_name
from testbed.semantics.topology import TopologyError, parse_topology

SHELL = ["s$(touch${IFS}pwned)", "Bad-Name!", "s1;touch pwned", "s1|id", "s1&id", "`id`", "s1 s2",
         "s1>x", "s1<x", "s1'x", 's1"x', "s1\\x", "s1*", "s1?", "s1\nid", "-rf", "s1#x", "s1{a,b}", "~root"]
ESCAPES = ["..", ".", "../../escaped", "a/../../b", "/etc/passwd", ".hidden", "a/b", ""]
HOSTILE = SHELL + ESCAPES


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def assert_refused_in_one_line(result, *words: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    line = result.stderr.rstrip("\n")
    assert "\n" not in line and line.startswith("error: "), line
    for word in words:
        assert word in line, line


@pytest.mark.parametrize("name", HOSTILE)
def test_neither_pattern_takes_a_hostile_name(name):
    with pytest.raises(UnsafeName):
        node_name(name)
    with pytest.raises(UnsafeName):
        path_name(name)


@pytest.mark.parametrize("name", ["s1", "h12", "abcdefghij"])
def test_plain_node_names_pass(name):
    assert node_name(name) == name


@pytest.mark.parametrize("name", ["20261127-064906-bmv2-123", "L2h-bmv2", "windows-s1.5-model", "cbsw1"])
def test_run_labels_in_use_pass(name):
    assert path_name(name) == name


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("command", [["experiment", "cbsw1", "--no-spark"], ["run", "cbsw1", "--no-spark"],
                                     ["experiment", "s4load", "--quick", "--no-spark"]])
def test_switch_name_option_is_refused_before_anything_starts(tmp_path, monkeypatch, command, name):
    monkeypatch.chdir(tmp_path)
    result = cli(*command, "--switch-name", name, "--out", str(tmp_path / "out"))
    assert_refused_in_one_line(result, "--switch-name")
    assert list(tmp_path.iterdir()) == [tmp_path / "testbed-state"] or list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", HOSTILE)
def test_experiment_settings_refuse_a_hostile_switch_name(name):
    with pytest.raises(ExperimentError, match="--switch-name"):
        Settings(switch_name=name)


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("where", ["switch", "host"])
def test_topology_names_are_node_names(name, where):
    data = topologies.topology_data([topologies.stream(1, {"kind": "count", "size": 2, "slide": 2}, ["h2"])],
                                    hosts=2)
    if where == "switch":
        data["switch"] = {"name": name}
    else:
        data["hosts"][name] = {}
    with pytest.raises(TopologyError):
        parse_topology(data)


@pytest.mark.parametrize("name", HOSTILE)
def test_a_renamed_switch_is_validated(name):
    topo = topologies.build([topologies.stream(1, {"kind": "count", "size": 2, "slide": 2}, ["h2"])], hosts=2)
    with pytest.raises(TopologyError, match="--switch-name"):
        topo.with_switch_name(name)
    with pytest.raises(TopologyError, match="also a host name"):
        topo.with_switch_name("h1")
    assert topo.with_switch_name("sx").switch.name == "sx"


@pytest.mark.parametrize("name", HOSTILE)
def test_the_network_refuses_a_topology_that_skipped_validation(tmp_path, name):
    """``model_copy`` skips pydantic's checks: the network is the last guard before Mininet's shells."""
    topo = topologies.build([topologies.stream(1, {"kind": "count", "size": 2, "slide": 2}, ["h2"])], hosts=2)
    bad = topo.model_copy(update={"switch": topo.switch.model_copy(update={"name": name})})
    with pytest.raises(UnsafeName):
        SplitterNetwork(bad, object, RunDir(tmp_path / "run")).build()


@pytest.mark.parametrize("name", HOSTILE)
def test_the_python_api_validates_a_topology_object_again(name):
    from testbed.api import _topology

    topo = topologies.build([topologies.stream(1, {"kind": "count", "size": 2, "slide": 2}, ["h2"])], hosts=2)
    bad = topo.model_copy(update={"switch": topo.switch.model_copy(update={"name": name})})
    with pytest.raises(TopologyError, match="switch.name"):
        _topology(bad)


@pytest.mark.parametrize("name", ESCAPES + ["s$(touch${IFS}pwned)", "a;b"])
def test_variant_names_are_folder_names_refused_before_calibration(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    patch = f'variants={{"{name}": {{window: {{lateness: 0}}}}}}'.replace("\n", "\\n")
    result = cli("experiment", "flights", "--param", patch, "--param", "exact=[]", "--out", str(tmp_path / "x"))
    assert_refused_in_one_line(result, "variants", "variant name")
    assert not (tmp_path / "x").exists()
    assert not (tmp_path / "escaped").exists() and not (tmp_path.parent / "escaped").exists()


@pytest.mark.parametrize("name", ESCAPES + ["cbsw1;id"])
def test_scenario_names_that_would_name_folders_are_refused(name):
    with pytest.raises(ValueError, match=r"\[0\]"):
        check_scenarios([name])
    with pytest.raises(ExperimentError, match="runs"):
        load_experiment(EXPERIMENTS_DIR / "s4load.yaml", Settings(params={"runs": [name]}))


@pytest.mark.parametrize("name", ESCAPES)
def test_run_and_file_names_never_leave_their_directory(tmp_path, name):
    expdir = ExperimentDir(tmp_path / "exp")
    rundir = RunDir(tmp_path / "run")
    for make in (expdir.run, lambda n: rundir.log(n, "source"), lambda n: rundir.log("h1", n),
                 rundir.switch_log, rundir.bmv2_log, rundir.pcap, rundir.source_events, rundir.spark_inbox,
                 lambda n: rundir.receiver_events(n, 3)):
        with pytest.raises(UnsafeName):
            make(name)
    assert expdir.run("L2h-bmv2").root.parent.parent == expdir.root


def test_no_code_of_the_project_hands_a_string_to_a_shell():
    """``shell=True``, ``os.system``, ``os.popen`` and Mininet's ``node.cmd`` (a string for the
    node's bash) appear nowhere in the project's code; commands are argument lists."""
    found, scanned = [], 0
    pattern = re.compile(r"shell\s*=\s*True|os\.system\(|os\.popen\(|\.cmd\(|\.cmdPrint\(|\.sendCmd\(")
    for folder in ("testbed", "operators", "scripts", "tools"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            scanned += 1
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line.split("#")[0]):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
    assert scanned > 100
