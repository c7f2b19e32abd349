"""p4cep's numbers: rates over rounds (median and spread), ratios that say when they are upper
bounds, and the generated Fig. 4 table beside P4CEP's bmv2 numbers."""
import pandas as pd
import pytest

from testbed.experiments import paper
from testbed.experiments.cep import (
    FORWARD_N,
    SPLITTER_N,
    CepWindowCost,
    capacities,
    capacity_of,
    capacity_sentence,
    capacity_trial,
    draw_fig4,
    fig4_table,
    summarize,
    targets_met,
)

pytestmark = pytest.mark.unit


def latency(target: str, n: int, us: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"seq": range(len(us)), "latency_us": us, "target": target, "n": n})


def rate(target: str, n: int, r: int, events_per_s: float, send_bound: bool = False) -> dict:
    return {"target": target, "n": n, "round": r, "events_per_s": events_per_s, "send_bound": send_bound}


def three_rounds(forward_bound: bool) -> list[dict]:
    lat = pd.concat([latency("bmv2", FORWARD_N, [100, 110, 120]), latency("bmv2", SPLITTER_N, [200, 210]),
                     latency("bmv2", 0, [300, 320]), latency("bmv2", 32, [330, 350, 2000])])
    rates = pd.DataFrame(
        [rate("bmv2", FORWARD_N, r, v, forward_bound and r == 1) for r, v in enumerate([90_000, 100_000, 80_000])]
        + [rate("bmv2", SPLITTER_N, r, v) for r, v in enumerate([12_000, 10_000, 11_000])]
        + [rate("bmv2", 0, r, v) for r, v in enumerate([10_000, 5_000, 9_000])]
        + [rate("bmv2", 32, r, v) for r, v in enumerate([6_000, 4_000, float("nan")])])
    return summarize(lat, rates)


def test_the_rate_is_the_median_of_the_rounds_with_its_spread():
    rows = {r["n"]: r for r in three_rounds(forward_bound=False)}
    assert rows[FORWARD_N]["events_per_s"] == 90_000 and rows[FORWARD_N]["rounds"] == 3
    spread = rows[0]["events_per_s"], rows[0]["events_per_s_min"], rows[0]["events_per_s_max"]
    assert spread == (9_000, 5_000, 10_000)
    # a round that measured no rate (too few copies) is left out, not counted as zero
    assert rows[32]["rounds"] == 2 and rows[32]["events_per_s"] == 5_000 and rows[32]["events_per_s_min"] == 4_000
    assert rows[0]["relative_throughput"] == pytest.approx(0.1)
    assert rows[0]["of_splitter_alone"] == pytest.approx(9 / 11, abs=1e-3)
    assert rows[32]["p50_us"] == 350 and rows[0]["forward_send_bound"] is False
    assert "relative_throughput" not in rows[FORWARD_N] and "of_splitter_alone" not in rows[SPLITTER_N]


def test_a_sender_bound_forwarding_blast_makes_every_ratio_an_upper_bound():
    rows = three_rounds(forward_bound=True)
    assert all(r["forward_send_bound"] for r in rows if r["n"] != FORWARD_N)
    table = "\n".join(fig4_table(rows, paper.P4CEP_FIG_4))
    assert "| bmv2 | 32 | 350 |" in table and "≤ 5.6 %" in table       # 5,000 of 90,000, at most
    three = "\n".join(fig4_table(three_rounds(forward_bound=False), paper.P4CEP_FIG_4))
    assert "≤" not in three.split("\n\n")[1] and "| 5.6 % |" in three


def test_the_fig4_table_sets_p4ceps_bmv2_numbers_beside_ours():
    lines = fig4_table(three_rounds(forward_bound=False), paper.P4CEP_FIG_4)
    rows = {line.split(" | ")[1]: line for line in lines if line.startswith("| bmv2 ")}
    assert "baseline: 475 µs, about 12,000 packets/s" in rows["plain forwarding"]
    assert "| 90,000 (80,000–100,000) |" in rows["plain forwarding"]
    assert rows["0"].endswith("| 512 µs |") and rows["32"].endswith("| over 10 ms |")
    assert rows["the splitter alone"].endswith("|  |")               # P4CEP has no such point
    assert "median over 3 rounds" in lines[-1]
    # the model has no counterpart in the paper; a record without a summary has no table
    model = summarize(latency("model", 0, [50.0]), pd.DataFrame([rate("model", 0, 0, 1000.0)]))
    assert fig4_table(model, paper.P4CEP_FIG_4)[-3].endswith("|  |  |  |")
    assert CepWindowCost.doc_table({"ours": {}}) == []


@pytest.mark.parametrize("rounds", [1, 3])
def test_the_figure_draws_from_one_round_or_several(tmp_path, rounds):
    """One round has no spread: its bar is empty, never negative."""
    lat = pd.concat([latency("bmv2", FORWARD_N, [100.0]), latency("bmv2", SPLITTER_N, [200.0]),
                     latency("bmv2", 0, [300.0]), latency("bmv2", 8, [310.0])])
    rates = pd.DataFrame([rate("bmv2", n, r, 1000.0 * (7 + n + r) / 3, r == 0)
                          for n in (FORWARD_N, SPLITTER_N, 0, 8) for r in range(rounds)])
    out = draw_fig4(lat, rates, None, paper.P4CEP_FIG_4, tmp_path / "fig4.png")
    assert out.stat().st_size > 10_000


def stamps(ins: list[int], outs: list[tuple[int, int]]) -> pd.DataFrame:
    """Taps' rows: frames in (seq = index) at ``ins`` ns, copies out as (seq, ns)."""
    rows = [("in", 1, 7, seq, ns) for seq, ns in enumerate(ins)]
    rows += [("out", 2, 7, seq, ns) for seq, ns in outs]
    return pd.DataFrame(rows, columns=["direction", "port", "stream", "seq", "ns"])


def even(count: int, per_s: float, lag_ns: int = 0) -> list[int]:
    return [lag_ns + round(i * 1e9 / per_s) for i in range(count)]


def test_a_capacity_trial_is_kept_up_with_only_if_every_frame_left_as_fast_as_it_came():
    count = 1000
    ins = even(count, 10_000)
    # every copy, 40 µs behind its frame: kept up with
    trial = capacity_trial(stamps(ins, list(enumerate(even(count, 10_000, 40_000)))), count, 10_000, 0)
    assert trial["kept_up"] and trial["copied"] == count
    assert trial["left_per_s"] == pytest.approx(10_000, rel=1e-3)
    # one frame without its copy
    assert not capacity_trial(stamps(ins, list(enumerate(even(count, 10_000))))[:-1], count, 10_000, 0)["kept_up"]
    # every copy, but let out at 80 % of the frames' rate: the queue grew, so the switch was slower
    slow = capacity_trial(stamps(ins, list(enumerate(even(count, 8_000)))), count, 10_000, 0)
    assert not slow["kept_up"] and slow["left_per_s"] == pytest.approx(8_000, rel=1e-3)
    # a copy twice is not two frames copied
    twice = list(enumerate(even(count, 10_000)))
    twice[-1] = (0, twice[-1][1])
    assert capacity_trial(stamps(ins, twice), count, 10_000, 0)["copied"] == count - 1
    # what the taps lost voids the trial
    assert not capacity_trial(stamps(ins, list(enumerate(even(count, 10_000)))), count, 10_000, 3)["kept_up"]


def searched(target: str, n: int, r: int, kept: dict[float, bool], arrived: float = 0.99) -> list[dict]:
    return [{"target": target, "n": n, "round": r, "trial": i, "asked": a, "arrived_per_s": arrived * a,
             "kept_up": k} for i, (a, k) in enumerate(kept.items())]


def test_the_splitter_alones_capacity_is_read_against_forwardings_and_held_to_issue_45():
    lat = pd.concat([latency("bmv2", FORWARD_N, [100.0]), latency("bmv2", SPLITTER_N, [200.0])])
    rates = pd.DataFrame([rate("bmv2", FORWARD_N, 0, 40_000.0), rate("bmv2", SPLITTER_N, 0, 20_000.0)])
    trials = pd.DataFrame(
        searched("bmv2", FORWARD_N, 0, {40_000: True, 80_000: False, 60_000: True, 70_000: False})
        + searched("bmv2", SPLITTER_N, 0, {20_000: True, 40_000: False, 30_000: True, 35_000: False}))
    rows = {r["n"]: r for r in summarize(lat, rates, trials)}
    assert rows[FORWARD_N]["capacity_per_s"] == pytest.approx(59_400)         # arrived, at the highest kept up
    assert rows[SPLITTER_N]["capacity_of_forward"] == pytest.approx(0.5)
    assert rows[SPLITTER_N]["forward_at_ceiling"] is False
    met = targets_met(list(rows.values()))["bmv2"]
    assert met["splitter_alone_at_least_half"] and met["splitter_alone_capacity_of_forward"] == pytest.approx(0.5)
    lines = fig4_table(list(rows.values()), paper.P4CEP_FIG_4)
    assert "| 29,700, 50.0 % of forwarding |" in next(x for x in lines if x.startswith("| bmv2 | the splitter"))
    assert capacities(trials)["per_s"].tolist() == pytest.approx([29_700, 59_400])     # n = -2, then -1
    said = capacity_sentence(list(rows.values()), {"switch_cpus": "0", "sender_cpus": "1"})
    assert said.startswith("The switch ran on CPU 0 and the sender on CPU 1.")
    assert "kept up with 29,700 events/s and plain forwarding with 59,400: 50.0% (in a blast, 20,000 against " \
           "40,000: 50.0%), so the target is met." in said
    # forwarding kept up with the sender's every rate: every share of it is an upper bound
    ceiling = pd.DataFrame(
        searched("bmv2", FORWARD_N, 0, {40_000: True, 80_000: True})
        + searched("bmv2", SPLITTER_N, 0, {20_000: True, 40_000: False, 30_000: False}))
    rows = {r["n"]: r for r in summarize(lat, rates, ceiling)}
    assert rows[FORWARD_N]["capacity_at_ceiling"] and rows[SPLITTER_N]["forward_at_ceiling"]
    assert not targets_met(list(rows.values()))["bmv2"]["splitter_alone_at_least_half"]   # 19,800 of 79,200
    table = "\n".join(fig4_table(list(rows.values()), paper.P4CEP_FIG_4))
    assert "≥ 79,200 |" in table and "19,800, ≤ 25.0 % of forwarding" in table
    said = capacity_sentence(list(rows.values()), None)
    assert said.startswith("The switch and the sender shared") and "at most 25.0%" in said and "not shown" in said
    assert capacity_sentence(three_rounds(forward_bound=False), None) is None


def test_a_rate_holds_when_most_of_its_trials_keep_up_and_its_cost_is_read_there():
    """Three trials a rate: 70,000 held by two of three, 80,000 by one (a lucky
    trial, which is no capacity); the capacity is the lower median of the
    trials kept up with at the highest rate held, and its CPU time per frame."""
    def trial(asked: float, kept: bool, held: bool, arrived: float, cpu_s: float) -> dict:
        return {"target": "bmv2", "n": FORWARD_N, "round": 0, "asked": asked, "sent": 40_000,
                "arrived_per_s": arrived, "kept_up": kept, "held": held, "switch_cpu_s": cpu_s}
    trials = pd.DataFrame([trial(40_000, True, True, 40_100, 0.9), trial(40_000, True, True, 39_900, 0.8),
                           trial(80_000, True, False, 80_050, 0.7), trial(80_000, False, False, 79_000, 0.7),
                           trial(80_000, False, False, 79_500, 0.7),
                           trial(70_000, True, True, 70_200, 0.64), trial(70_000, False, True, 69_000, 0.6),
                           trial(70_000, True, True, 69_800, 0.56)])
    per_s, at_ceiling, cpu_us = capacity_of(trials)
    assert per_s == 69_800 and not at_ceiling and cpu_us == pytest.approx(14.0)
    # a record from before the repeats: one trial a rate, no CPU time
    old = trials.drop(columns=["held", "switch_cpu_s"]).iloc[[0, 3]]
    assert capacity_of(old) == (40_100, False, None)
    assert capacity_of(trials.assign(kept_up=False)) == (0.0, False, None)


def test_forwardings_cost_per_event_over_the_splitters_is_set_beside_the_capacities():
    lat = pd.concat([latency("bmv2", FORWARD_N, [100.0]), latency("bmv2", SPLITTER_N, [200.0])])
    rates = pd.DataFrame([rate("bmv2", FORWARD_N, 0, 40_000.0), rate("bmv2", SPLITTER_N, 0, 20_000.0)])

    def searched_cpu(n: int, r: int, kept: dict[float, bool], cpu_s: float) -> list[dict]:
        return [{**row, "sent": 40_000, "switch_cpu_s": cpu_s, "held": row["kept_up"]}
                for row in searched("bmv2", n, r, kept)]
    trials = pd.DataFrame(
        searched_cpu(FORWARD_N, 0, {40_000: True, 80_000: False}, 0.6)
        + searched_cpu(FORWARD_N, 1, {40_000: True, 80_000: False}, 0.5)
        + searched_cpu(FORWARD_N, 2, {40_000: True, 80_000: False}, 0.7)
        + searched_cpu(SPLITTER_N, 0, {20_000: True, 40_000: False}, 0.8))
    rows = {r["n"]: r for r in summarize(lat, rates, trials)}
    assert rows[FORWARD_N]["cpu_us_per_event"] == pytest.approx(15.0)       # median of 12.5, 15, 17.5
    assert rows[SPLITTER_N]["cpu_us_per_event"] == pytest.approx(20.0)
    assert rows[SPLITTER_N]["per_cpu_of_forward"] == pytest.approx(0.75)
    said = capacity_sentence(list(rows.values()), None)
    assert ("the switch process used 20.0 µs of CPU for the splitter alone and 15.0 for forwarding: per CPU "
            "second, the splitter alone took 75.0% of forwarding's events.") in said
    # without CPU times (a record from before them), nothing is said of them
    assert "µs of CPU" not in capacity_sentence(summarize(lat, rates, trials.drop(columns=["switch_cpu_s"])), None)


def test_a_capacity_search_tries_a_rate_until_most_of_its_trials_decide(monkeypatch):
    """Up to three trials a rate, stopping once two agree; every trial is
    returned with its rate's verdict and the switch's CPU time over it."""
    from contextlib import contextmanager

    from testbed.experiments import cep

    outcome = {10_000: [True, True], 20_000: [False, True, True], 40_000: [True, False, False],
               30_000: [False, False], 25_000: [True, False, True]}
    clock = iter(range(1000))
    asked: list[float] = []

    @contextmanager
    def switch(*_args, **_kwargs):
        yield None, None, 4242

    monkeypatch.setattr(cep, "prepared_switch", switch)
    monkeypatch.setattr(cep, "cpu_seconds", lambda pid: 0.5 * next(clock) if pid == 4242 else None)
    monkeypatch.setattr(cep, "sent_through", lambda rig, frames, rate, placement: (rate, 0))

    def trial(rate, sent, asked_rate, drops):
        asked.append(asked_rate)
        tried = sum(1 for a in asked if a == asked_rate)
        return {"asked": asked_rate, "sent": sent, "arrived_per_s": asked_rate, "kept_up": outcome[rate][tried - 1]}
    monkeypatch.setattr(cep, "capacity_trial", trial)
    trials = cep.capacity_search("bmv2", None, None, "s", [b""] * 10, None, 10_000, 400_000, 2, None, repeats=3)
    assert [t["asked"] for t in trials] == [10_000] * 2 + [20_000] * 3 + [40_000] * 3 + [30_000] * 2 + [25_000] * 3
    assert [t["held"] for t in trials] == [True] * 5 + [False] * 5 + [True] * 3
    assert all(t["switch_cpu_s"] == 0.5 for t in trials)
    assert capacity_of(pd.DataFrame(trials))[0] == 25_000
