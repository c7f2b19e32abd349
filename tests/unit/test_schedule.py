"""The topology's schedule and adapt sections: validation, rate profiles, the check's changes."""
import math

import pytest
import yaml

from support import topologies
from testbed import ROOT
from testbed.semantics.schedule import rate_profile, send_offsets
from testbed.semantics.topology import TopologyError, nominal_times, parse_topology, point_events


def with_schedule(schedule=None, adapt=None):
    data = topologies.topology_data([topologies.stream(5, {"kind": "count", "size": 4, "slide": 2}, ["h2", "h3"],
                                                       events=3000, rate=500)], 6)
    if schedule is not None:
        data["schedule"] = schedule
    if adapt is not None:
        data["adapt"] = adapt
    return data


def test_a_good_schedule_loads_and_its_hosts_become_operators():
    topo = parse_topology(with_schedule(
        [{"at": 1, "change": {"stream": 5, "operators": ["h4", "h5"]}},
         {"at": 2, "change": {"stream": 5, "window": {"kind": "count", "size": 6, "slide": 3}}},
         {"at": 2.5, "fail": {"host": "h4", "how": "link"}},
         {"at": 3.5, "recover": {"host": "h4"}},
         {"at": 0.5, "rate": {"stream": 5, "rate": 2000, "ramp": 1}}],
        {"failover": True, "elastic": [{"stream": 5, "pool": ["h2", "h3", "h6"], "min": 1, "max": 3,
                                        "high": 900, "low": 100}]}))
    assert [e.action for e in topo.schedule] == ["change", "change", "fail", "recover", "rate"]
    assert set(topo.operator_hosts()) == {"h2", "h3", "h4", "h5", "h6"}


BAD = {
    "no action": ([{"at": 1}], "schedule[0]: an entry has exactly one of change, rate, fail, recover, cep (got none)"),
    "recover unfailed": ([{"at": 1, "recover": {"host": "h2"}}], "schedule[0].recover.host: 'h2' has not failed"),
    "recover before fail": ([{"at": 2, "fail": {"host": "h2"}}, {"at": 1, "recover": {"host": "h2"}}],
                            "schedule[1].recover.host"),
    "fail twice": ([{"at": 1, "fail": {"host": "h2"}}, {"at": 2, "fail": {"host": "h2", "how": "link"}}],
                   "schedule[1].fail.host: h2 has already failed"),
    "two actions": ([{"at": 1, "fail": {"host": "h2"}, "rate": {"stream": 5, "rate": 9}}], "schedule[0]"),
    "negative time": ([{"at": -1, "fail": {"host": "h2"}}], "schedule[0].at"),
    "infinite time": ([{"at": math.inf, "fail": {"host": "h2"}}], "schedule[0].at"),
    "unknown stream": ([{"at": 1, "change": {"stream": 9, "operators": ["h2"]}}], "schedule[0].change.stream"),
    "unknown host": ([{"at": 1, "change": {"stream": 5, "operators": ["h2", "zz"]}}],
                     "schedule[0].change.operators[1]: unknown host 'zz'"),
    "source as operator": ([{"at": 1, "change": {"stream": 5, "operators": ["h1"]}}],
                           "schedule[0].change.operators[0]"),
    "empty change": ([{"at": 1, "change": {"stream": 5}}], "schedule[0].change"),
    "kind change": ([{"at": 1, "change": {"stream": 5, "window": {"kind": "time", "size": 4, "slide": 2}}}],
                    "schedule[0].change.window.kind"),
    "bad window": ([{"at": 1, "change": {"stream": 5, "window": {"kind": "count", "size": 0, "slide": 2}}}],
                   "schedule[0].change.window: size"),
    "fail a source": ([{"at": 1, "fail": {"host": "h1"}}], "schedule[0].fail.host"),
    "fail how": ([{"at": 1, "fail": {"host": "h2", "how": "melt"}}], "schedule[0].fail.how"),
    "zero rate": ([{"at": 1, "rate": {"stream": 5, "rate": 0}}], "schedule[0].rate.rate"),
    "nan rate": ([{"at": 1, "rate": {"stream": 5, "rate": math.nan}}], "schedule[0].rate.rate"),
    "unknown field": ([{"at": 1, "fail": {"host": "h2"}, "colour": 1}], "schedule[0].colour: unknown field"),
    "change after the end": ([{"at": 7, "change": {"stream": 5, "operators": ["h2"]}}],
                             "schedule[0].at: 7 s is after stream 5's last event, due at 5.998 s"),
    "rate after the end": ([{"at": 1, "rate": {"stream": 5, "rate": 3000}},
                            {"at": 9, "rate": {"stream": 5, "rate": 10}}], "schedule[1].at"),
    "at overflows": ([{"at": 1e300, "fail": {"host": "h2"}}], "schedule[0].at"),
    "ramp too long": ([{"at": 1, "rate": {"stream": 5, "rate": 900, "ramp": 1e18}}], "schedule[0].rate.ramp"),
    "rate too high": ([{"at": 1, "rate": {"stream": 5, "rate": 1e18}}], "schedule[0].rate.rate"),
    "rate too low": ([{"at": 1, "rate": {"stream": 5, "rate": 1e-300}}], "schedule[0].rate.rate"),
    "boolean time": ([{"at": True, "fail": {"host": "h2"}}], "schedule[0].at: true is a boolean"),
    "placed twice": ([{"at": 1, "after": {"stream": 5, "events": 10}, "fail": {"host": "h2"}}],
                     "schedule[0]: an entry is placed by exactly one of at (seconds) and after"),
    "not placed": ([{"fail": {"host": "h2"}}], "schedule[0]: an entry is placed by exactly one of at"),
    "point of two measures": ([{"after": {"stream": 5, "events": 10, "ts": 4}, "fail": {"host": "h2"}}],
                              "schedule[0].after: a point is either events or ts"),
    "point of no measure": ([{"after": {"stream": 5}, "fail": {"host": "h2"}}], "schedule[0].after"),
    "point of no stream": ([{"after": {"stream": 9, "events": 10}, "fail": {"host": "h2"}}],
                           "schedule[0].after.stream: no stream 9"),
    "point at the end": ([{"after": {"stream": 5, "events": 3000}, "fail": {"host": "h2"}}],
                         "schedule[0].after.events: stream 5 sends 3000 events, and this point is at its end"),
    "point past the last timestamp": ([{"after": {"stream": 5, "ts": 2999}, "fail": {"host": "h2"}}],
                                      "schedule[0].after.ts: stream 5 sends 3000 events, and this point is at "
                                      "its event 3000"),
    "point of zero events": ([{"after": {"stream": 5, "events": 0}, "fail": {"host": "h2"}}],
                             "schedule[0].after.events"),
    "rate after a point": ([{"after": {"stream": 5, "events": 10}, "rate": {"stream": 5, "rate": 9}}],
                           "schedule[0]: a rate entry is placed by at"),
    "hold of a change": ([{"after": {"stream": 5, "events": 10}, "change": {"stream": 5, "operators": ["h3"]},
                           "hold": "failover"}], "schedule[0].hold: only a fail or recover entry waits for failover"),
    "hold at a time": ([{"at": 1, "fail": {"host": "h2"}, "hold": "failover"}],
                       "schedule[0].hold: only an entry placed by after holds its source"),
    "hold without failover": ([{"after": {"stream": 5, "events": 10}, "fail": {"host": "h2"}, "hold": "failover"}],
                              "schedule[0].hold: waits for failover, which needs adapt.failover: true"),
    "hold of no kind": ([{"after": {"stream": 5, "events": 10}, "fail": {"host": "h2"}, "hold": "forever"}],
                        "schedule[0].hold"),
}


def test_fail_and_recover_can_hold_their_source_for_failover():
    topo = parse_topology(with_schedule(
        [{"after": {"stream": 5, "events": 100}, "fail": {"host": "h2"}, "hold": "failover"},
         {"after": {"stream": 5, "events": 900}, "recover": {"host": "h2"}, "hold": "failover"},
         {"after": {"stream": 5, "events": 1000}, "fail": {"host": "h3"}}], {"failover": True}))
    assert [e.hold for e in topo.schedule] == ["failover", "failover", "action"]


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_entry_is_one_line_naming_it(case):
    schedule, field = BAD[case]
    with pytest.raises(TopologyError) as err:
        parse_topology(with_schedule(schedule), "t.yaml")
    message = str(err.value)
    assert message.startswith("t.yaml: ") and field in message and "\n" not in message, message


@pytest.mark.parametrize("adapt, field", [
    ({"elastic": [{"stream": 5, "pool": ["h2"], "min": 2, "max": 1, "high": 2, "low": 1}]}, "adapt.elastic[0]"),
    ({"elastic": [{"stream": 5, "pool": ["h2"], "max": 2, "high": 2, "low": 1}]}, "adapt.elastic[0]"),
    ({"elastic": [{"stream": 5, "pool": ["h2", "h3"], "max": 2, "high": 1, "low": 2}]}, "adapt.elastic[0]"),
    ({"elastic": [{"stream": 9, "pool": ["h2"], "max": 1, "high": 2, "low": 1}]}, "adapt.elastic[0].stream"),
    ({"elastic": [{"stream": 5, "pool": ["h1"], "max": 1, "high": 2, "low": 1}]}, "adapt.elastic[0].pool[0]"),
    ({"detect_timeout": 0}, "adapt.detect_timeout"),
])
def test_bad_adapt_sections(adapt, field):
    with pytest.raises(TopologyError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_topology(with_schedule(None, adapt), "t.yaml")


def test_changes_are_checked_in_time_order_against_the_one_before():
    """Lateness may not grow: the second change (earlier in the file, later in time) raises it back."""
    data = topologies.topology_data([topologies.stream(5, {"kind": "time", "size": 10, "slide": 5, "lateness": 5},
                                                       ["h2"], events=40, rate=10)], 4)
    data["schedule"] = [{"at": 2, "change": {"stream": 5, "window": {"kind": "time", "size": 10, "slide": 5,
                                                                      "lateness": 5}}},
                        {"at": 1, "change": {"stream": 5, "window": {"kind": "time", "size": 10, "slide": 5}}}]
    with pytest.raises(TopologyError, match=r"schedule\[0\]\.change: .*lateness cannot grow"):
        parse_topology(data, "t.yaml")


def test_rate_profile_ramps_in_steps_and_offsets_follow_it():
    topo = parse_topology(with_schedule([{"at": 1, "rate": {"stream": 5, "rate": 1500, "ramp": 1}}]))
    profile = rate_profile(topo.streams[0], topo.schedule)
    assert profile[0] == (0.0, 500.0) and profile[-1] == (1.75, 1500.0) and len(profile) == 5
    offsets = send_offsets(profile, 2000)
    assert offsets[499] < 1.0 <= offsets[500]                  # 500 events in the first second
    assert offsets == sorted(offsets) and len(offsets) == 2000
    rate_at_end = 1 / (offsets[-1] - offsets[-2])
    assert rate_at_end == pytest.approx(1500)


def test_shipped_adaptation_topologies_validate():
    for name in ("p4ssadapt", "failover", "elastic"):
        topo = parse_topology(yaml.safe_load((ROOT / "topologies" / f"{name}.yaml").read_text()), name)
        assert topo.schedule or topo.adapt


def test_adaptation_experiments_name_adaptive_topologies(tmp_path):
    from testbed.experiments.base import ExperimentError, load_experiment

    for name in ("p4ssadapt", "failover", "elastic"):
        spec, params = load_experiment(ROOT / "experiments" / f"{name}.yaml")
        assert spec.kind == "adaptation" and params.topology == name
    path = tmp_path / "e.yaml"
    path.write_text("name: e\nkind: adaptation\nparams: {topology: cbsw1}\n")
    with pytest.raises(ExperimentError, match="params.topology: .*cbsw1 has neither a schedule nor an adapt"):
        load_experiment(path)


def test_points_in_stream_terms_order_the_schedule_at_the_streams_pace():
    """A point is due when its event is (500/s here), so the chain of changes is
    checked in that order: the fail after event 400 (0.8 s) comes before the
    recover at 1 s, though the file lists it last."""
    topo = parse_topology(with_schedule([
        {"at": 1.0, "recover": {"host": "h2"}},
        {"after": {"stream": 5, "ts": 100}, "change": {"stream": 5, "operators": ["h3", "h4"]}},
        {"after": {"stream": 5, "events": 400}, "fail": {"host": "h2"}}]))
    due = nominal_times(topo)
    assert due == {0: 1.0, 1: pytest.approx(100 / 500), 2: pytest.approx(399 / 500)}
    assert point_events(topo.streams[0], topo.schedule[1].after) == 101
    with pytest.raises(TopologyError, match=r"schedule\[0\]\.recover\.host: 'h2' has not failed"):
        parse_topology(with_schedule([{"at": 0.5, "recover": {"host": "h2"}},
                                      {"after": {"stream": 5, "events": 400}, "fail": {"host": "h2"}}]))


def test_a_point_on_a_replayed_stream_is_placed_by_events(tmp_path):
    (tmp_path / "r.csv").write_text("t,v\n" + "".join(f"{i},{i}\n" for i in range(3000)))
    data = with_schedule([{"after": {"stream": 5, "ts": 10}, "fail": {"host": "h2"}}])
    data["streams"][0]["replay"] = {"path": str(tmp_path / "r.csv"), "ts": "t", "value": "v"}
    with pytest.raises(TopologyError, match=r"schedule\[0\]\.after\.ts: stream 5 replays a file"):
        parse_topology(data)
    data["schedule"] = [{"after": {"stream": 5, "events": 10}, "fail": {"host": "h2"}}]
    assert parse_topology(data).schedule[0].after.events == 10


def test_pacing_an_experiment_moves_its_points_with_its_events():
    from testbed.experiments.adaptation import paced
    data = with_schedule([{"after": {"stream": 5, "events": 1000}, "fail": {"host": "h2"}},
                          {"after": {"stream": 5, "ts": 2000}, "recover": {"host": "h2"}}])
    data["streams"][0]["timestamps"] = {"start": 100, "step": 1}
    slow = paced(data, 0.5)
    assert slow["schedule"][0]["after"]["events"] == 500 and slow["schedule"][1]["after"]["ts"] == 1050
    parse_topology(slow)


@pytest.mark.parametrize("change", [
    {"operators": ["h3"]},                                                          # operators only
    {"window": {"kind": "time", "size": 9, "slide": 3, "starts": "event"}},          # the spec itself
], ids=["operators", "window"])
def test_a_stream_whose_windows_start_at_events_takes_no_change(change):
    """The switch keeps one epoch's starts only (docs/windows.md, "Where windows start")."""
    window = {"kind": "time", "size": 10, "slide": 5, "starts": "event"}
    data = topologies.topology_data([topologies.stream(5, window, ["h2"], events=40, rate=10)], 4)
    data["schedule"] = [{"at": 1, "change": {"stream": 5, **change}}]
    with pytest.raises(TopologyError, match=r"schedule\[0\]\.change\.window\.starts: .*start at events takes no "
                                            r"change") as err:
        parse_topology(data, "t.yaml")
    assert "\n" not in str(err.value) and str(err.value).startswith("t.yaml: ")


def test_a_change_cannot_turn_grid_windows_into_event_ones():
    data = topologies.topology_data([topologies.stream(5, {"kind": "time", "size": 10, "slide": 5}, ["h2"],
                                                       events=40, rate=10)], 4)
    data["schedule"] = [{"at": 1, "change": {"stream": 5, "window": {"kind": "time", "size": 10, "slide": 5,
                                                                      "starts": "event"}}}]
    with pytest.raises(TopologyError, match=r"window\.starts"):
        parse_topology(data, "t.yaml")


@pytest.mark.parametrize("adapt, field", [
    ({"elastic": [{"stream": 5, "pool": ["h2", "h3", "h4"], "max": 3, "high": 2, "low": 1}]},
     "adapt.elastic[0].stream"),
    ({"failover": True}, "adapt.failover"),
])
def test_policies_that_change_operators_refuse_windows_that_start_at_events(adapt, field):
    data = with_schedule(None, adapt)
    data["streams"][0]["window"] = {"kind": "time", "size": 10, "slide": 5, "starts": "event"}
    with pytest.raises(TopologyError, match=field.replace("[", r"\[").replace("]", r"\]") + ": .*start at events"):
        parse_topology(data, "t.yaml")
    data["streams"][0]["window"]["starts"] = "grid"
    parse_topology(data, "t.yaml")                   # the same policy on the grid is fine


@pytest.mark.parametrize("schedule, adapt, changes", [
    (None, None, False),
    ([{"at": 0.5, "rate": {"stream": 5, "rate": 2000}}, {"at": 1, "fail": {"host": "h2", "how": "kill"}}],
     None, False),
    ([{"at": 1, "change": {"stream": 5, "operators": ["h4", "h5"]}}], None, True),
    (None, {"failover": True}, True),
    (None, {"elastic": [{"stream": 5, "pool": ["h2", "h3", "h6"], "min": 1, "max": 3, "high": 900,
                         "low": 100}]}, True),
])
def test_a_topology_says_whether_a_stream_may_change(schedule, adapt, changes):
    """Only a scheduled change or a policy that changes operators makes bmv2 run
    the build that takes changes; rates and failures alone change no stream."""
    from testbed.targets.bmv2 import toolchain

    topo = parse_topology(with_schedule(schedule, adapt))
    assert topo.changes_streams() is changes
    build = toolchain.splitter_program(topo.sends_batches(), topo.cep is not None, topo.changes_streams())
    assert build == (toolchain.PROGRAM if changes else toolchain.FIXED_PROGRAM)
    # Batches and the CEP stage have one build each, which takes changes.
    assert toolchain.splitter_program(True, False, False) == toolchain.BATCH_PROGRAM
    assert toolchain.splitter_program(False, True, False) == toolchain.CEP_PROGRAM
