"""``testbed check``: losses count once, duplicates are expected, late windows are explained."""
import pandas as pd

from support.records import record_of
from support.records import switch_saw as saw
from testbed.analysis.check import check_frames, compare_windows, expected_deliveries
from testbed.semantics.topology import WindowSpec
from testbed.semantics.windows import TOO_LATE


def frames(topo, ts=None, lose=(), duplicate=(), received_too=()):
    """Sources in send order and the deliveries the oracle asks for, minus the
    events in ``lose`` (they never reach the switch).  ``duplicate`` seqs are
    sent twice; ``received_too`` adds stray (seq, operator) deliveries."""
    s = topo.streams[0]
    seqs = list(range(s.events))
    ts = ts or seqs
    rows = []
    for seq in seqs:
        for _ in range(2 if seq in duplicate else 1):
            rows.append({"stream": s.id, "seq": seq, "ts": ts[seq], "send_ns": len(rows)})
    sources = pd.DataFrame(rows)
    oracle = s.oracle()
    deliveries = []
    for row in rows:
        if row["seq"] in lose:
            continue
        for op in oracle.step(row["seq"], row["ts"]).operators:
            deliveries.append({"stream": s.id, "seq": row["seq"], "operator": op})
    deliveries += [{"stream": s.id, "seq": seq, "operator": op} for seq, op in received_too]
    return {str(s.id): s.record()}, sources, pd.DataFrame(deliveries)


def switch_saw(n_events):
    return {"switch": saw(9, n_events)}


def count_topology(topo):
    return topo.build([topo.stream(9, {"kind": "count", "size": 5, "slide": 2}, ["h2", "h3", "h4"], events=40)], 4)


def test_events_lost_before_the_switch_count_once(topo):
    """Three events never reach the switch: the switch numbers the others
    0, 1, 2, ...; so does the check, and nothing after the loss is wrong."""
    t = count_topology(topo)
    streams, sources, deliveries = frames(t, lose={7, 8, 20})
    r = check_frames(record_of(streams, **switch_saw(37)), sources, deliveries)[9]
    assert (r.lost_before_switch, r.missing, r.extra, r.duplicates) == (3, 0, 0, 0)
    assert not r.ok and r.lost == 3
    assert "never reached the switch: 3 events, first seqs 7, 8, 20" in r.examples


def test_without_the_switch_counters_a_loss_shifts_count_windows(topo):
    """The same loss judged without the switch's testimony: what the old check saw."""
    t = count_topology(topo)
    streams, sources, deliveries = frames(t, lose={7, 8, 20})
    r = check_frames(record_of(streams), sources, deliveries)[9]
    assert r.lost == 0 and r.missing + r.extra > 20


def test_copies_lost_after_the_switch_stay_missing_copies(topo):
    """The switch saw every event: a delivery missing at one operator is one missing copy."""
    t = count_topology(topo)
    streams, sources, deliveries = frames(t)
    deliveries = deliveries.drop(index=deliveries.index[0])
    r = check_frames(record_of(streams, **switch_saw(40)), sources, deliveries)[9]
    assert (r.missing, r.extra, r.lost) == (1, 0, 0)


def test_link_drops_name_their_events(topo):
    t = count_topology(topo)
    streams, sources, deliveries = frames(t, lose={3, 30})
    drops = pd.DataFrame({"stream": [9, 9], "seq": [3, 30]})
    r = check_frames(record_of(streams, **switch_saw(38)), sources, deliveries, drops)[9]
    assert (r.lost_on_link, r.lost_before_switch, r.missing, r.extra) == (2, 0, 0, 0)
    assert r.ok          # a lossy link's drops are named and explained


def test_duplicates_sent_by_the_source_are_expected_twice(topo):
    t = count_topology(topo)
    streams, sources, deliveries = frames(t, duplicate={5, 6})
    r = check_frames(record_of(streams, **switch_saw(42)), sources, deliveries)[9]
    assert r.ok and r.sent == 42
    extra_copy = deliveries[deliveries["seq"] == 10].iloc[[0]]
    r = check_frames(record_of(streams, **switch_saw(42)), sources, pd.concat([deliveries, extra_copy]))[9]
    assert r.duplicates == 1 and not r.ok


def test_late_events_within_lateness_are_expected_and_too_late_ones_are_by_design(topo):
    t = topo.build([topo.stream(9, {"kind": "time", "size": 10, "slide": 5, "lateness": 10}, ["h2", "h3"],
                                events=8)], 3)
    ts = [100, 104, 112, 103, 109, 90, 120, 111]     # 103, 109, 111 late within 10; 90 too late
    exp = expected_deliveries(t.streams[0], pd.DataFrame({"seq": range(8), "ts": ts}))
    assert exp.by_design == {TOO_LATE: 1}
    assert {seq for seq, _ in exp.copies} == {0, 1, 2, 3, 4, 6, 7}
    # 90 would lie in window 0 only ([90,100) before the origin 100 -> no windows at all)
    assert exp.late_windows == set()
    late_in_window = expected_deliveries(t.streams[0], pd.DataFrame({"seq": range(3), "ts": [100, 121, 108]}))
    assert late_in_window.by_design == {TOO_LATE: 1} and late_in_window.late_windows == {0, 1}


def test_window_check_explains_windows_short_of_too_late_events():
    ref = pd.DataFrame({"stream": [1, 1, 1], "window": [0, 1, 2], "key": [None] * 3, "operator": ["a", "b", "a"],
                        "result": [5.0, 4.0, 3.0], "n_events": [5, 4, 3]})
    got = ref.iloc[[1, 2]].copy()                    # window 0 lost entirely
    got.loc[got["window"] == 1, ["result", "n_events"]] = [3.0, 3]   # window 1 short by one
    plain = compare_windows(got, ref)[1]
    assert not plain.ok and plain.missing == 1 and plain.incomplete == 1
    explained = compare_windows(got, ref, {1: {0, 1}})[1]
    assert explained.ok and explained.too_late == 2 and explained.missing == 0
    assert explained.examples[0] == "window 0 key -1: 5 of 5 events were too late"
    partly = compare_windows(got, ref, {1: {0}})[1]
    assert not partly.ok and partly.too_late == 1 and partly.incomplete == 1


def test_window_check_explains_windows_a_failed_operator_owned():
    ref = pd.DataFrame({"stream": [1, 1, 1], "window": [0, 1, 2], "key": [None] * 3, "operator": ["a", "b", "a"],
                        "result": [5.0, 4.0, 3.0], "n_events": [5, 4, 3]})
    got = ref.iloc[[1, 2]].copy()                    # a failed before window 0 reached Spark
    got.loc[got["window"] == 2, ["result", "n_events"]] = [2.0, 2]   # ... and with one event of window 2 unread
    failed = compare_windows(got, ref, failed_windows={1: {0, 2}})[1]
    assert failed.ok and failed.failed == 2 and failed.missing == 0 and failed.incomplete == 0
    assert failed.as_json()["affected_by_failure"] == 2
    # a window the failure did not touch must still be whole
    wrong = got.copy()
    wrong.loc[wrong["window"] == 1, ["result", "n_events"]] = [3.0, 3]
    assert not compare_windows(wrong, ref, failed_windows={1: {0, 2}})[1].ok


def test_a_short_window_under_another_key_is_the_failed_window_not_an_extra_one():
    """The failover experiment's case: an argmax query whose operator died
    two events into window 7 computes that window's maximum over those two,
    under another key than the whole window's."""
    ref = pd.DataFrame({"stream": [1, 1], "window": [7, 8], "key": [631, 886], "operator": ["h4", "h5"],
                        "result": [6765.0, 15547.0], "n_events": [5, 5]})
    got = pd.DataFrame({"stream": [1, 1], "window": [7, 8], "key": [263, 886], "operator": ["h4", "h5"],
                        "result": [5273.0, 15547.0], "n_events": [2, 5]})
    plain = compare_windows(got, ref)[1]
    assert not plain.ok and plain.missing == 1 and plain.extra == 1
    failed = compare_windows(got, ref, failed_windows={1: {7}})[1]
    assert failed.ok and failed.failed == 1 and failed.extra == 0 and failed.matching == 1
    late = compare_windows(got, ref, late_windows={1: {7}})[1]
    assert late.ok and late.too_late == 1 and late.extra == 0
    # a row with as many events as the whole window is no short window: still extra
    whole = got.assign(n_events=[5, 5])
    assert compare_windows(whole, ref, failed_windows={1: {7}})[1].extra == 1
    # and a window the failure did not touch is not excused
    assert not compare_windows(got, ref, failed_windows={1: {8}})[1].ok


def test_a_run_with_a_change_is_checked_against_its_epochs(topo):
    """Deliveries made under a change armed after event 16 (n=5, delta=2 over
    h2-h4, then n=3, delta=1 over h5, h6): the check passes with the change
    the record names, and fails without it or with it one slide off."""
    t = count_topology(topo)
    s = t.streams[0]
    oracle = s.oracle()
    new = {"kind": "count", "size": 3, "slide": 1}
    rows, deliveries = [], []
    for seq in range(s.events):
        if seq == 17:
            start = oracle.arm(s.config(WindowSpec.model_validate(new), ["h5", "h6"]))
        rows.append({"stream": s.id, "seq": seq, "ts": seq, "send_ns": seq})
        deliveries += [{"stream": s.id, "seq": seq, "operator": op} for op in oracle.step(seq, seq).operators]
    assert start == 18                       # the next window start of n=5, delta=2 after k=16
    sources, got = pd.DataFrame(rows), pd.DataFrame(deliveries)
    assert {"h2", "h3", "h4"} & set(got[got["seq"] == 18]["operator"])   # old windows still open at 18
    change = {"start": start, "window": new, "operators": ["h5", "h6"], "armed_ns": 1}
    record = {**switch_saw(40), "changes": {"9": [change]}}
    assert check_frames(record_of({"9": s.record()}, **record), sources, got)[9].ok
    assert not check_frames(record_of({"9": s.record()}, **switch_saw(40)), sources, got)[9].ok
    off = {**record, "changes": {"9": [{**change, "start": start + 2}]}}
    r = check_frames(record_of({"9": s.record()}, **off), sources, got)[9]
    assert not r.ok and r.missing and r.extra


def test_a_recorded_change_must_keep_the_axis(topo):
    import pytest
    s = count_topology(topo).streams[0]
    with pytest.raises(ValueError, match="window.kind"):
        s.recorded_changes([{"start": 2, "window": {"kind": "time", "size": 3, "slide": 1}}])
    with pytest.raises(ValueError, match="not a window start"):
        s.oracle(s.recorded_changes([{"start": 3, "operators": ["h5"]}]))
