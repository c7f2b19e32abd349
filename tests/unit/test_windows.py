"""The oracle against brute force and against the papers' worked examples."""
from hypothesis import given
from hypothesis import strategies as st

from testbed.semantics.windows import (
    BEFORE_ORIGIN,
    NO_WINDOW,
    TOO_LATE,
    CountWindows,
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
