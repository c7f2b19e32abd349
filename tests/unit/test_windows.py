"""The oracle against brute force and against the papers' worked examples."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.semantics.windows import (
    BEFORE_ORIGIN,
    NO_WINDOW,
    TOO_LATE,
    CountWindows,
    EventStartTimeWindows,
    StreamConfig,
    StreamOracle,
    TimeWindows,
    max_windows,
    operators_for,
    windows_on_axis,
    windows_per_position,
)


def brute_windows(x, size, slide):
    """Every window j whose interval [j*slide, j*slide+size) holds x, by enumeration."""
    return [j for j in range(0, x // slide + size + 2) if j * slide <= x < j * slide + size]


@given(x=st.integers(0, 5000), size=st.integers(1, 60), slide=st.integers(1, 60))
def test_windows_on_axis_matches_enumeration(x, size, slide):
    assert list(windows_on_axis(x, size, slide)) == brute_windows(x, size, slide)


@given(x=st.integers(0, 5000), size=st.integers(1, 60), slide=st.integers(1, 60))
def test_window_count_depends_only_on_position_after_startup(x, size, slide):
    full, extra = windows_per_position(size, slide)
    q, p = divmod(x, slide)
    expected = min(q + 1, full + (1 if p < extra else 0))
    assert len(windows_on_axis(x, size, slide)) == expected
    assert expected <= max_windows(size, slide)


@given(size=st.integers(1, 30), slide=st.integers(1, 30), n_ops=st.integers(1, 8),
       n=st.integers(1, 200))
def test_count_oracle_sends_each_window_to_round_robin_operator(size, slide, n_ops, n):
    ops = [f"o{i}" for i in range(n_ops)]
    oracle = StreamOracle(CountWindows(size, slide), ops)
    for k in range(n):
        v = oracle.step(seq=k, ts=0)
        want = {ops[j % n_ops] for j in brute_windows(k, size, slide)}
        assert set(v.operators) == want
        assert len(v.operators) == len(set(v.operators))  # each operator once
        assert (v.dropped == NO_WINDOW) == (not want)


@given(size=st.integers(1, 50), slide=st.integers(1, 50), n_ops=st.integers(1, 8),
       gaps=st.lists(st.integers(0, 120), min_size=1, max_size=80), start=st.integers(0, 10**6))
def test_time_oracle_with_irregular_gaps(size, slide, n_ops, gaps, start):
    ops = [f"o{i}" for i in range(n_ops)]
    oracle = StreamOracle(TimeWindows(size, slide), ops)
    ts = start
    for seq, gap in enumerate(gaps):
        ts += gap
        v = oracle.step(seq, ts)
        origin = start + gaps[0]      # by default the first event's timestamp
        want = {ops[j % n_ops] for j in brute_windows(ts - origin, size, slide)}
        assert set(v.operators) == want





def test_time_oracle_fixed_origin_and_too_late():
    oracle = StreamOracle(TimeWindows(10, 5), ["a", "b"], origin=100)
    assert oracle.step(0, 99).dropped == BEFORE_ORIGIN
    v = oracle.step(1, 107)           # windows 0 [100,110) and 1 [105,115)
    assert list(v.windows) == [0, 1] and v.operators == ("a", "b")
    assert oracle.step(2, 106).dropped == TOO_LATE       # lateness 0: any step back is too late
    assert list(oracle.step(3, 112).windows) == [1, 2]


def test_late_events_go_to_their_own_windows():
    """docs/windows.md's example: size 10, slide 5, origin 100, lateness 10, operators a, b, c."""
    oracle = StreamOracle(TimeWindows(10, 5), ["a", "b", "c"], origin=100, lateness=10)
    v = oracle.step(0, 123)                                   # windows 3 [115,125), 4 [120,130)
    assert list(v.windows) == [3, 4] and v.operators == ("a", "b")
    late = oracle.step(1, 114)                                # 9 behind: windows 1, 2
    assert list(late.windows) == [1, 2] and late.operators == ("b", "c")
    assert oracle.step(2, 112).dropped == TOO_LATE            # 11 behind
    assert list(oracle.step(3, 113).windows) == [1, 2]        # exactly 10 behind: still in
    assert oracle.step(4, 95).dropped == TOO_LATE             # too late wins over before the origin
    assert list(oracle.step(5, 126).windows) == [4, 5]        # the newest moves on


def test_s4_table_one_n4_d1_n5():
    """S4 Table I: Sigma(n=4, delta=1) over 5 operators."""
    ops = ["w0", "w1", "w2", "w3", "w4"]
    oracle = StreamOracle(CountWindows(4, 1), ops)
    got = [set(oracle.step(k, k).operators) for k in range(9)]
    assert got == [
        {"w0"}, {"w0", "w1"}, {"w0", "w1", "w2"}, {"w0", "w1", "w2", "w3"},
        {"w1", "w2", "w3", "w4"}, {"w2", "w3", "w4", "w0"}, {"w3", "w4", "w0", "w1"},
        {"w4", "w0", "w1", "w2"}, {"w0", "w1", "w2", "w3"},
    ]


def test_p4ss_figure_two():
    """P4SS Fig. 2: (a) n=3 d=3 over A,B,C; (b) n=3 d=1 over A,B,C,D."""
    a = StreamOracle(CountWindows(3, 3), ["A", "B", "C"])
    assert [a.step(k, k).operators for k in range(10)] == [
        ("A",)] * 3 + [("B",)] * 3 + [("C",)] * 3 + [("A",)]
    b = StreamOracle(CountWindows(3, 1), ["A", "B", "C", "D"])
    got = [set(b.step(k, k).operators) for k in range(6)]
    # "the third packet is sent to A, B and C. Next packet is sent to B, C and D"
    assert got == [{"A"}, {"A", "B"}, {"A", "B", "C"}, {"B", "C", "D"}, {"C", "D", "A"}, {"D", "A", "B"}]


def test_s4_time_windows_coincide_for_consecutive_timestamps():
    """S4 anchors a new window at the first event with t >= previous start + tau.
    With timestamps 0, 1, 2, ... those anchors are 0, tau, 2*tau: the same windows."""
    size, slide, ops = 6, 3, ["a", "b", "c"]
    ours = StreamOracle(TimeWindows(size, slide), ops)
    starts = []          # S4's anchored window starts
    for t in range(60):
        if not starts or t >= starts[-1] + slide:
            starts.append(t)
        s4 = {ops[j % 3] for j, st_ in enumerate(starts) if st_ <= t < st_ + size}
        assert set(ours.step(t, t).operators) == s4


def test_gap_events_reach_no_operator():
    oracle = StreamOracle(CountWindows(2, 5), ["a", "b"])
    got = [oracle.step(k, k) for k in range(10)]
    assert [v.operators for v in got] == [("a",), ("a",), (), (), (), ("b",), ("b",), (), (), ()]
    assert all(v.dropped == NO_WINDOW for v in got if not v.operators)


def test_more_overlap_than_operators_hits_each_operator_once():
    assert operators_for(range(0, 7), ["a", "b", "c"]) == ("b", "c", "a")


@given(size=st.integers(1, 40), slide=st.integers(1, 40), n_ops=st.integers(1, 6),
       lateness=st.integers(0, 160), origin=st.one_of(st.none(), st.integers(0, 300)),
       moves=st.lists(st.integers(-150, 60), min_size=1, max_size=120))
def test_lateness_oracle_matches_brute_force(size, slide, n_ops, lateness, origin, moves):
    """An event more than L behind the newest earlier timestamp is too late;
    any other goes to the windows of its own timestamp."""
    ops = [f"o{i}" for i in range(n_ops)]
    oracle = StreamOracle(TimeWindows(size, slide), ops, origin=origin, lateness=lateness)
    ts, seen = 200, []
    for seq, move in enumerate(moves):
        ts = max(0, ts + move)
        v = oracle.step(seq, ts)
        o = seen[0] if origin is None and seen else (ts if origin is None else origin)
        if seen and max(seen) - ts > lateness:
            assert v.dropped == TOO_LATE and not v.operators
        elif ts < o:
            assert v.dropped == BEFORE_ORIGIN
        else:
            want = brute_windows(ts - o, size, slide)
            assert list(v.windows) == want
            assert set(v.operators) == {ops[j % n_ops] for j in want}
        seen.append(ts)


# ---------------------------------------------------------------------------
# reconfiguration: epochs against a brute-force reading of docs/windows.md
# ---------------------------------------------------------------------------
POOL = ["o0", "o1", "o2", "o3", "o4", "o5", "o6"]


class BruteEpochs:
    """The definition spelt out: a list of epochs, each a list of explicit
    windows (global id, start, end, owner), built by enumeration."""

    def __init__(self, size, slide, ops, lateness=0):
        self.epochs = [{"start": 0, "size": size, "slide": slide, "ops": ops, "lateness": lateness, "end": None}]

    def arm(self, newest, size, slide, ops, lateness=0):
        cur = self.epochs[-1]
        config = {"size": size, "slide": slide, "ops": ops, "lateness": lateness}
        if len(self.epochs) > 1 and (newest is None or newest < cur["start"]):
            cur.update(config)              # the pending change is replaced
            return
        floor = cur["start"] if newest is None else max(newest, cur["start"])
        grid = (cur["start"] + j * cur["slide"] for j in range(1, 10**6))
        boundary = next(s for s in grid if s > floor)
        cur["end"] = boundary
        self.epochs.append({"start": boundary, **config, "end": None})

    def windows(self, horizon):
        out, gid = [], 0
        for e in self.epochs:
            j = 0
            while True:
                s = e["start"] + j * e["slide"]
                if (e["end"] is not None and s >= e["end"]) or s > horizon:
                    break
                out.append((gid, s, s + e["size"], e["ops"][j % len(e["ops"])]))
                gid, j = gid + 1, j + 1
            if e["end"] is None:
                break
        return out

    def holding(self, x, horizon):
        return [(g, owner) for g, s, end, owner in self.windows(horizon) if s <= x < end]

    def lateness_at(self, newest):
        return [e for e in self.epochs if e["start"] <= newest][-1]["lateness"] if newest >= 0 else \
            self.epochs[0]["lateness"]


configs = st.tuples(st.integers(1, 12), st.integers(1, 12),
                    st.lists(st.sampled_from(POOL), min_size=1, max_size=5, unique=True))


def check_against_brute(verdict, brute, oracle, x, horizon):
    want = brute.holding(x, horizon)
    assert list(verdict.windows) == [g for g, _ in want]
    assert set(verdict.operators) == {owner for _, owner in want}
    assert len(verdict.operators) == len(set(verdict.operators))
    # every window goes whole to the one operator that owns it
    assert all(oracle.owner(g) == owner for g, owner in want)


@settings(max_examples=250)
@given(first=configs, n=st.integers(1, 150),
       changes=st.lists(st.tuples(st.integers(0, 150), configs), max_size=5))
def test_count_epochs_match_brute_force(first, n, changes):
    """Count windows with changes armed between random events: every event
    lies in exactly the windows, of any epoch, that the definition names."""
    size, slide, ops = first
    oracle = StreamOracle(CountWindows(size, slide), ops)
    brute = BruteEpochs(size, slide, ops)
    arms = sorted(changes, key=lambda c: c[0])
    for k in range(n):
        for at, (sz, sl, o) in arms:
            if at == k:
                b = oracle.arm(StreamConfig(CountWindows(sz, sl), tuple(o)))
                brute.arm(k - 1 if k else None, sz, sl, o)
                assert b == brute.epochs[-1]["start"]
        v = oracle.step(k, 0)
        check_against_brute(v, brute, oracle, k, k)
        assert (v.dropped == NO_WINDOW) == (not v.operators)


@settings(max_examples=250)
@given(first=configs, lateness=st.integers(0, 30), origin=st.one_of(st.none(), st.integers(0, 50)),
       moves=st.lists(st.integers(-25, 30), min_size=1, max_size=100),
       changes=st.lists(st.tuples(st.integers(0, 100), configs, st.integers(0, 30)), max_size=5))
def test_time_epochs_match_brute_force(first, lateness, origin, moves, changes):
    """Time windows with gaps, late events and changes of spec and operators:
    late events reach back into older epochs by their own timestamps, and the
    lateness in force is the one of the epoch the newest timestamp is in."""
    size, slide, ops = first
    oracle = StreamOracle(TimeWindows(size, slide), ops, origin=origin, lateness=lateness)
    brute = BruteEpochs(size, slide, ops, lateness)
    arms = sorted(changes, key=lambda c: c[0])
    ts, newest, o = 100, None, origin
    for seq, move in enumerate(moves):
        for at, (sz, sl, ops_), late in arms:
            if at == seq:
                b = oracle.arm(StreamConfig(TimeWindows(sz, sl), tuple(ops_), late))
                brute.arm(None if newest is None else newest - o, sz, sl, ops_, late)
                assert b == brute.epochs[-1]["start"]
        ts = max(0, ts + move)
        v = oracle.step(seq, ts)
        if newest is not None and newest - ts > brute.lateness_at(newest - o):
            assert v.dropped == TOO_LATE and not v.operators
            continue
        newest = ts if newest is None else max(newest, ts)
        o = ts if o is None else o
        if ts < o:
            assert v.dropped == BEFORE_ORIGIN
            continue
        check_against_brute(v, brute, oracle, ts - o, newest - o)


def test_reconfiguration_worked_examples():
    """docs/windows.md, "Reconfiguration": the two worked examples."""
    oracle = StreamOracle(CountWindows(3, 1), ["A", "B", "C", "D"])
    for k in range(6):
        oracle.step(k, 0)
    assert oracle.arm(StreamConfig(CountWindows(3, 1), ("X", "Y"))) == 6
    got = [oracle.step(k, 0) for k in range(6, 10)]
    assert [list(v.windows) for v in got] == [[4, 5, 6], [5, 6, 7], [6, 7, 8], [7, 8, 9]]
    assert [v.operators for v in got] == [("A", "B", "X"), ("B", "X", "Y"), ("Y", "X"), ("X", "Y")]

    t = StreamOracle(TimeWindows(10, 5), ["a", "b"], origin=0, lateness=10)
    t.step(0, 12)
    assert t.arm(StreamConfig(TimeWindows(6, 3), ("c", "d", "e"), 10)) == 15
    v = t.step(1, 16)                       # old window 2 [10,20) and new window 0 [15,21)
    assert list(v.windows) == [2, 3] and v.operators == ("a", "c")
    late = t.step(2, 11)                    # before the boundary: old windows 1 [5,15) and 2 only
    assert list(late.windows) == [1, 2] and late.operators == ("b", "a")
    v = t.step(3, 20)                       # new windows 0 [15,21) and 1 [18,24): old window 2 has ended
    assert list(v.windows) == [3, 4] and v.operators == ("c", "d")
    assert t.step(4, 9).dropped == TOO_LATE           # 11 behind the newest


def test_a_change_must_start_at_a_window_start_of_the_epoch_before():
    import pytest
    cfg = StreamConfig(CountWindows(4, 2), ("a",))
    with pytest.raises(ValueError, match="not a window start"):
        StreamOracle(CountWindows(4, 2), ["a"], changes=[(3, cfg)])
    with pytest.raises(ValueError, match="cannot turn"):
        StreamOracle(CountWindows(4, 2), ["a"], changes=[(2, StreamConfig(TimeWindows(4, 2), ("a",)))])


# ---- starts: event (S4's window-start rule, docs/windows.md "Where windows start")

def brute_event_starts(xs, size, slide):
    """Per event of an in-order stream (coordinates ``xs``, origin 0): the
    windows that hold it, by the definition read literally.  The starts are
    found first, over the whole stream: window 0 at 0, then each next one
    at the first event at or past the previous start + slide."""
    starts = [0]
    for x in xs:
        if x >= starts[-1] + slide:
            starts.append(x)
    return [[j for j, s in enumerate(starts) if s <= x < s + size] for x in xs]


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.integers(0, 25), min_size=1, max_size=60), size=st.integers(1, 12),
       slide=st.integers(1, 12), n=st.integers(1, 5))
def test_event_starts_match_the_definition(steps, size, slide, n):
    xs = [sum(steps[:i + 1]) - steps[0] for i in range(len(steps))]   # in order, from 0, gaps of any size
    ops = [f"o{i}" for i in range(n)]
    oracle = StreamOracle(EventStartTimeWindows(size, slide), ops)
    expected = brute_event_starts(xs, size, slide)
    for i, (x, want) in enumerate(zip(xs, expected)):
        v = oracle.step(i, 1000 + x)
        assert list(v.windows) == want
        assert set(v.operators) == {ops[j % n] for j in want}
        assert v.dropped == (None if want else NO_WINDOW)


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(st.integers(0, 25), min_size=1, max_size=40), size=st.integers(1, 12),
       slide=st.integers(1, 12), n=st.integers(1, 4))
def test_event_starts_assign_many_walks_the_stream(steps, size, slide, n):
    ts = np.cumsum(steps) + 7
    oracle = StreamOracle(EventStartTimeWindows(size, slide), ["a", "b", "c", "d"][:n])
    stepped = [list(oracle.step(i, int(t)).windows) for i, t in enumerate(ts)]
    # assign_many is handed the events out of order; it walks them by index
    order = np.arange(len(ts))[::-1]
    whole = EventStartTimeWindows(size, slide).assign_many(order, ts[::-1], int(ts[0]))
    assert [list(r) for r in whole[::-1]] == stepped
    owners = np.asarray([i % n for i in range(len(ts))])
    owned = EventStartTimeWindows(size, slide).assign_many(np.arange(len(ts)), ts, int(ts[0]), owners, n)
    assert [list(r) for r in owned] == [[j for j in w if j % n == o] for w, o in zip(stepped, owners)]


def test_event_starts_after_a_gap_open_one_window_at_the_event():
    """Tumbling, 5: grid windows [1,6), [6,11), [11,16) put t=13 in window 2;
    S4's rule opens window 1 at 13, so the round robin does not skip b."""
    grid = StreamOracle(TimeWindows(5, 5), ["a", "b", "c"])
    event = StreamOracle(EventStartTimeWindows(5, 5), ["a", "b", "c"])
    for i, t in enumerate((1, 2, 13, 17, 18)):
        g, e = grid.step(i, t), event.step(i, t)
        assert (t, g.operators, e.operators) == (t, *{1: (("a",), ("a",)), 2: (("a",), ("a",)),
                                                     13: (("c",), ("b",)), 17: (("a",), ("b",)),
                                                     18: (("a",), ("c",))}[t])
    assert event.assigner.window_starts == (0, 12, 17)


def test_event_starts_fixed_origin_is_window_zero():
    """With a fixed origin, window 0 starts there (not at an event); events before it are before_origin."""
    oracle = StreamOracle(EventStartTimeWindows(4, 4), ["a", "b"], origin=10)
    got = [oracle.step(i, t) for i, t in enumerate((8, 11, 21, 23, 25))]
    assert [v.dropped for v in got] == [BEFORE_ORIGIN, None, None, None, None]
    assert [tuple(v.windows) for v in got] == [(), (0,), (1,), (1,), (2,)]


def test_event_starts_late_events_never_open_windows():
    """The oracle's reading of lateness under starts: event (the topology refuses
    the combination, the switch keeps too few starts): a late event lies in
    the windows that hold its timestamp and opens none."""
    oracle = StreamOracle(EventStartTimeWindows(6, 3), ["a", "b", "c"], lateness=10)
    assert tuple(oracle.step(0, 100).windows) == (0,)
    assert tuple(oracle.step(1, 108).windows) == (1,)        # opens [8, 14)
    assert tuple(oracle.step(2, 104).windows) == (0,)        # late: in [0, 6) only
    assert oracle.assigner.window_starts == (0, 8)


def test_event_starts_take_no_change():
    with pytest.raises(ValueError, match="start at events takes no change"):
        change = (2, StreamConfig(EventStartTimeWindows(4, 2), ("b",)))
        StreamOracle(EventStartTimeWindows(4, 2), ["a"], changes=[change])
    oracle = StreamOracle(EventStartTimeWindows(4, 2), ["a"])
    with pytest.raises(ValueError, match="start at events takes no change"):
        oracle.arm(StreamConfig(EventStartTimeWindows(4, 2), ("b",)))
    grid = StreamOracle(TimeWindows(4, 2), ["a"])
    with pytest.raises(ValueError, match="start at events takes no change"):
        grid.arm(StreamConfig(EventStartTimeWindows(4, 2), ("b",)))


def test_event_starts_coincide_with_the_grid_when_every_slide_starts_with_an_event():
    """Timestamps on a step that divides the slide: every slide holds an event
    at its grid start, so both rules give the same windows."""
    for size, slide, step in ((9, 3, 1), (9, 3, 3), (5, 5, 1), (10, 4, 2)):
        grid = StreamOracle(TimeWindows(size, slide), ["a", "b", "c"])
        event = StreamOracle(EventStartTimeWindows(size, slide), ["a", "b", "c"])
        for i in range(50):
            assert tuple(grid.step(i, 5 + i * step).windows) == tuple(event.step(i, 5 + i * step).windows)
