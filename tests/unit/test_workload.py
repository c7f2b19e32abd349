"""What sources send: generated events, and perturbed send plans."""
import numpy as np

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
