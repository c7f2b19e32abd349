"""A topology's ``cep:`` rules (docs/cep.md, "Rules in a topology"): what validation accepts and refuses.

Every refusal is one line naming the file and the field, through the real command.
"""
import copy
import re

import pytest
import yaml
from click.testing import CliRunner

from support import topologies
from testbed import ROOT
from testbed.cli import main
from testbed.semantics.cep.oracle import BasicEvent, CepOracle
from testbed.semantics.topology import parse_topology

pytestmark = pytest.mark.unit

GOOD = {
    "name": "t", "hosts": {"h1": {}, "h2": {}, "h3": {}},
    "streams": [{"id": 291, "source": "h1", "window": {"kind": "count", "size": 3, "slide": 3},
                 "operators": ["h2"], "events": 10, "rate": 100}],
    "cep": {"windows": [{"name": "recent", "stream": 291, "field": "value", "size": 8}],
            "complex_events": [{"name": "spike", "id": 1, "stream": 291, "pattern": "[value > 5]; [sum(recent) > 10]",
                                "returns": "sum(recent)", "sinks": ["h3"]}]},
}


def rule(**fields):
    data = copy.deepcopy(GOOD)
    data["cep"]["complex_events"][0].update(fields)
    return data


def window(**fields):
    data = copy.deepcopy(GOOD)
    data["cep"]["windows"][0].update(fields)
    return data


CASES = {
    "unknown-field": (rule(pattern="[valeu > 5]"), "cep.complex_events[0].pattern", "unknown field 'valeu'"),
    "syntax": (rule(pattern="[value > ]"), "cep.complex_events[0].pattern", "column 10"),
    "mixed-glue": (rule(pattern="[value > 1] && [key > 1] || [seq > 1]"), "cep.complex_events[0].pattern",
                   "unexpected '||'"),
    "undeclared-window": (rule(pattern="[sum(old) > 5]"), "cep.complex_events[0].pattern",
                          "sum(old) names no declared window"),
    "window-of-another-stream": (rule(stream=292), "cep.complex_events[0].pattern", "over stream 291"),
    "n-over-the-maximum": (window(size=33), "cep.windows[0].size", "less than or equal to 32"),
    "constant-out-of-range": (rule(pattern="[seq > 4294967296]"), "cep.complex_events[0].pattern",
                              "outside seq's range 0 .. 4294967295"),
    "count-beyond-n": (rule(pattern="[count(recent) == 9]"), "cep.complex_events[0].pattern", "range 0 .. 8"),
    "huge-constant": (rule(pattern="[value > " + "9" * 4301 + "]"), "cep.complex_events[0].pattern",
                      "4301 digits"),
    "too-many-states": (rule(pattern=" && ".join(f"[value == {i}]" for i in range(6))),
                        "cep.complex_events[0].pattern", "needs 63 states, more than the 32"),
    "too-many-comparisons": (rule(pattern=" || ".join(f"[value == {i}]" for i in range(9))),
                             "cep.complex_events[0].pattern", "9 distinct comparisons"),
    "bad-return": (rule(returns="avg(recent)"), "cep.complex_events[0].returns", "unknown aggregate 'avg'"),
    "bad-strategy": (rule(strategy="greedy"), "cep.complex_events[0].strategy", "strict"),
    "unknown-sink": (rule(sinks=["h9"]), "cep.complex_events[0].sinks[0]", "unknown host 'h9'"),
    "no-sink": (rule(sinks=[]), "cep.complex_events[0].sinks", "at least 1"),
    "unknown-stream": (dict(GOOD, cep=dict(GOOD["cep"], windows=GOOD["cep"]["windows"] + [
        {"name": "other", "stream": 7, "field": "key", "size": 2}])), "cep.windows[1].stream", "no stream has id 7"),
    "boolean-id": (rule(id=True), "cep.complex_events[0].id", "boolean"),
    "duplicate-window": (dict(GOOD, cep=dict(GOOD["cep"], windows=GOOD["cep"]["windows"] * 2)),
                         "cep.windows[1].name", "declared twice"),
    "duplicate-id": (dict(GOOD, cep=dict(GOOD["cep"], complex_events=[
        GOOD["cep"]["complex_events"][0], dict(GOOD["cep"]["complex_events"][0], name="other")])),
        "cep.complex_events[1].id", "also complex_events[0]"),
    "batched-stream": (dict(GOOD, streams=[dict(GOOD["streams"][0], batch={"events": 4, "max_delay": 0.01})]),
                       "streams[0].batch", "one per frame"),
    "two-counts-on-one-window": (rule(pattern="[count(recent > 1) >= 2]; [count(recent < 0) == 1]"),
                                 "cep.complex_events[0].pattern", "already counts recent > 1"),
    "sink-is-a-source": (rule(sinks=["h1"]), "cep.complex_events[0].sinks[0]", "a stream's source"),
    "strict-conjunction-of-four": (rule(pattern=" && ".join(f"[value == {i}]" for i in range(4)), strategy="strict"),
                                   "cep.complex_events[0].pattern", "needs 75 states, more than the 32"),
    "bad-rule-name": (rule(name="Spike-1"), "cep.complex_events[0].name",
                      "'Spike-1' is not a rule name: 1 to 32 characters, each a lowercase letter, a digit or _"),
    "long-window-name": (window(name="w" * 33), "cep.windows[0].name", "1 to 32 characters"),
    "seq-sum-beyond-its-reach": (dict(GOOD, cep={"windows": [{"name": "s", "stream": 291, "field": "seq", "size": 2}],
                                                 "complex_events": [dict(GOOD["cep"]["complex_events"][0],
                                                                         pattern="[sum(s) > 8589934591]",
                                                                         returns="value")]}),
                                 "cep.complex_events[0].pattern", "outside sum(s)'s range 0 .. 8589934590"),
}


def test_a_sum_of_seqs_compares_beyond_32_bits_as_it_never_wraps():
    """A sum is kept in 64 bits whatever the field (docs/cep.md, "Window operators")."""
    data = dict(GOOD, cep={"windows": [{"name": "s", "stream": 291, "field": "seq", "size": 2}],
                           "complex_events": [dict(GOOD["cep"]["complex_events"][0], pattern="[sum(s) > 4294967295]",
                                                   returns="sum(s)")]})
    topo = parse_topology(data, plan_only=True)
    oracle = CepOracle(topo.cep.window_specs(), topo.cep.pattern_specs())
    found = oracle.run([BasicEvent(291, s, 0, 0, 0) for s in (2**32 - 2, 2**32 - 1)])
    assert [(c.seq, c.value) for c in found] == [(2**32 - 1, 2**33 - 3)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_rule_is_one_line_naming_the_file_and_field(tmp_path, case):
    data, field, words = CASES[case]
    topologies.assert_validate_refuses(tmp_path, data, field, words)


def test_valid_rules_are_accepted_and_their_sinks_run_receivers(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    topo = parse_topology(GOOD)
    assert topo.sink_hosts() == ["h3"] and topo.receiver_hosts() == ["h2", "h3"]


def test_a_stream_batched_one_event_to_a_frame_runs_beside_rules():
    """Its frames are plain event frames, which the CEP build takes."""
    one = dict(GOOD, streams=[dict(GOOD["streams"][0], batch={"events": 1, "max_delay": 0.01})])
    topo = parse_topology(one)
    assert topo.cep is not None and not topo.sends_batches()


def test_valid_rules_reach_the_oracle_through_a_plan_only_read():
    topo = parse_topology(GOOD, plan_only=True)
    oracle = CepOracle(topo.cep.window_specs(), topo.cep.pattern_specs())
    found = oracle.run([BasicEvent(291, s, 0, 0, v) for s, v in enumerate([6, 2, 3, 4])])
    assert [(c.pattern, c.seq, c.value) for c in found] == [(1, 2, 11)]
    assert topo.cep.automata()[1].states == 2


def test_the_example_in_the_docs_is_valid():
    text = (ROOT / "docs" / "cep.md").read_text()
    block = re.search(r"```yaml\n(cep:.*?)```", text, re.S).group(1)
    data = copy.deepcopy(GOOD)
    data["hosts"]["h8"] = {}
    data.update(yaml.safe_load(block))
    topo = parse_topology(data, plan_only=True)
    assert [r.name for r in topo.cep.complex_events] == ["spike"]
