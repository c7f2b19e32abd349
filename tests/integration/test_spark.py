"""The operators' Spark application: windowed results equal a centralized run."""
import subprocess
import time

import pandas as pd
import pytest

from support import topologies
from support.records import record_of, written
from support.switched import through_model
from testbed import api
from testbed.analysis.check import check_windows, events_the_switch_never_saw
from testbed.analysis.spark import SparkApp, job_description, loopback_env, spark_home, spark_missing
from testbed.analysis.verdicts import frame_check
from testbed.emulation.ports import free_loopback_port, port_listening
from testbed.rundir import RunDir
from testbed.semantics.topology import WindowSpec, load_topology
from testbed.semantics.workload import stream_events

pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(spark_missing() is not None, reason=f"Spark skipped: {spark_missing()}")]
#: Spark in local mode or on loopback ports found free, run directories under tmp_path, state in the
#: test's own TESTBED_STATE_DIR: nothing another test uses, so ``make test`` runs these beside the other
#: integration tests (tests/conftest.py), on the unit tests' worker, not after them (seven minutes).
BESIDE_THE_OTHERS = True

STREAMS = [
    ({"kind": "count", "size": 5, "slide": 2}, "nexmark_q7", 3),
    ({"kind": "time", "size": 9, "slide": 4}, "ysb_campaign_count", 2),
    ({"kind": "count", "size": 4, "slide": 4}, "mean", 2),
    ({"kind": "time", "size": 30, "slide": 20, "origin": 0}, "max", 3),   # gaps between windows
]


def make_run_dir(tmp_path, drop_one=False, change=None, lose=(), streams=None, cep=None):
    """A run directory as the emulation leaves it, with deliveries as the
    pipeline model makes them (Windows headers included).  ``change``:
    ``(seq, stream id, new window, new operators)``, armed before that event;
    ``lose``: (stream id, seq) of events sent but lost before the switch;
    ``streams``: stream dicts instead of ``STREAMS``'; ``cep``: the
    topology's ``cep:`` rules, whose sinks are hosts ``sk1`` and ``sk2``."""
    ops = ["o1", "o2", "o3"]
    streams = streams or [topologies.stream(i + 1, window, ops[:n_ops], source="src", events=400, rate=1000,
                                            query={"kind": query}, timestamps={"start": 5, "step": 3})
                          for i, (window, query, n_ops) in enumerate(STREAMS)]
    extra = {"cep": cep} if cep else {}
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = topologies.write(tmp_path / "topology.yaml",
                            topologies.topology_data(streams, ["src", *ops, "sk1", "sk2"], name="sp", **extra))
    topo = load_topology(path)
    rundir = RunDir(tmp_path / "run").create()
    sources = []
    for s in topo.streams:
        ev = pd.DataFrame(stream_events(s, topo.seed))
        ev["stream"], ev["send_ns"] = s.id, range(len(ev))
        sources.append(ev)
    sources = pd.concat(sources)
    sources.to_parquet(rundir.sources)
    applied = []

    def reconfigure(controller, plan, row):
        if change and (row.stream, row.seq) == (change[1], change[0]):
            old = next(s for s in topo.streams if s.id == row.stream)
            new = old.model_copy(update={"window": WindowSpec.model_validate(change[2]),
                                         "operators": change[3]})
            applied.append((controller, controller.change(plan, new, timeout=0)))

    lost = sources.set_index(["stream", "seq"]).index.isin(list(lose))
    d = through_model(topo, sources[~lost], reconfigure)
    changes = {}
    for controller, c in applied:
        controller.wait_applied(c, timeout=0)
        changes[str(c.stream)] = [{**c.record(), "start": c.boundary}]   # count windows: the origin is 0
    accepted = sources[~lost].groupby("stream").size()
    record = record_of({str(s.id): s.record() for s in topo.streams},    # what the check reads
                       switch={"streams": {str(sid): {"in": int(n), "out": 0, "dropped": {}}
                                           for sid, n in accepted.items()}, "ports": {}, "non_event": 0},
                       changes=changes)
    rundir.write_record(record)
    if drop_one:
        d = d.drop(index=d[(d["stream"] == 1) & (d["seq"] == 100)].index[:1])
    d.to_parquet(rundir.deliveries)
    for op, part in d.groupby("operator"):
        inbox = rundir.spark_inbox(op)
        inbox.mkdir(parents=True)
        half = len(part) // 2              # two hand-overs per operator, as a receiver would
        part.iloc[:half].to_parquet(inbox / f"{op}-000000.parquet")
        part.iloc[half:].to_parquet(inbox / f"{op}-000001.parquet")
    return topo, rundir


def run_app(topo, rundir, master):
    app = SparkApp(rundir, job_description(topo, "test", rundir), master)
    app.start()
    try:
        app.wait_ready()
        record = rundir.read_record()
        return app.finish(changes=record.changes,
                          unseen=events_the_switch_never_saw(frame_check(record, rundir)))
    finally:
        app.stop()


def test_operators_equal_centralized_run_local(tmp_path):
    topo, rundir = make_run_dir(tmp_path)
    analysis = run_app(topo, rundir, "local[2]")
    results = check_windows(rundir)
    assert set(results) == {1, 2, 3, 4}
    for sid, r in results.items():
        assert r.ok, (sid, r.as_json())
        assert r.reference > 20
    windows = pd.read_parquet(rundir.windows)
    assert list(windows.columns)[:7] == ["stream", "window", "operator", "key", "result", "n_events", "completed_ns"]
    # stream 3 is count-tumbling n=4 over 2 operators: 100 windows of 4 events, round robin
    s3 = windows[windows["stream"] == 3]
    assert len(s3) == 100 and set(s3["n_events"]) == {4}
    assert (s3.sort_values("window")["operator"].tolist() == ["o1", "o2"] * 50)
    # YSB: one row per campaign that had views in the window
    assert windows[windows["stream"] == 2]["key"].nunique() > 10
    assert analysis["spark_master"] == "local[2]"
    amp = {r["stream"]: r["amplification"] for r in analysis["amplification"]}
    assert amp[3] == pytest.approx(1.0) and amp[1] == pytest.approx(2.5, rel=0.02)
    assert all(r["p50"] == pytest.approx(1.0) for r in analysis["latency_us"])
    complete = {r["stream"]: (r["complete"], r["windows"]) for r in analysis["completeness"]}
    assert all(done == total > 0 for done, total in complete.values()), complete


def test_key_split_streams_and_slashs_workloads_equal_the_reference(tmp_path):
    """Streams split by key (Zipf keys, sliding count and time windows), and
    Slash's CM and RO: every window equals the centralized reference, and a
    key-split stream's (window, key) rows come from the key's operator alone."""
    from testbed.semantics.splitting import key_owners

    ops = ["o1", "o2", "o3"]
    zipf = {"distribution": "zipf", "s": 1.2, "n": 50}
    common = {"source": "src", "events": 600, "rate": 1000, "timestamps": {"start": 5, "step": 3}}
    streams = [
        topologies.stream(1, {"kind": "count", "size": 5, "slide": 2}, ops, split="key", keys=zipf,
                          query={"kind": "count_by_key"}, **common),
        topologies.stream(2, {"kind": "time", "size": 30, "slide": 12, "lateness": 24}, ops[:2], split="key",
                          query={"kind": "mean_by_key"}, **common),
        topologies.stream(3, {"kind": "time", "size": 60, "slide": 60}, ops, query={"kind": "cm"}, **common),
        topologies.stream(4, {"kind": "count", "size": 100, "slide": 100}, ops, split="key",
                          query={"kind": "ro"}, **common),
    ]
    topo, rundir = make_run_dir(tmp_path, streams=streams)
    run_app(topo, rundir, "local[2]")
    results = check_windows(rundir)
    assert set(results) == {1, 2, 3, 4}
    for sid, r in results.items():
        assert r.ok and r.reference > 20, (sid, r.as_json())
    windows = pd.read_parquet(rundir.windows)
    for s in topo.streams:
        rows = windows[windows["stream"] == s.id]
        if s.split == "key":
            assert (rows["operator"].to_numpy() == key_owners(rows["key"].to_numpy(), s.operators)).all()
            assert rows.groupby(["window", "key"]).size().max() == 1
    assert windows[windows["stream"] == 4]["key"].max() > 10**7        # RO's keys span 100M


def test_operators_learn_their_windows_across_a_change(tmp_path):
    """Stream 1 (count, n=5, delta=2 over o1..o3) becomes n=6, delta=3 over
    o3, o1 mid-stream.  The operators know nothing of the change: their
    windows come from the Windows headers alone, and every window equals the
    reference computed with the run's epochs."""
    topo, rundir = make_run_dir(tmp_path, change=(150, 1, {"kind": "count", "size": 6, "slide": 3}, ["o3", "o1"]))
    (change,) = written(rundir)["changes"]["1"]
    assert 150 <= change["start"] <= 152          # the first slide start at or after the arming
    run_app(topo, rundir, "local[2]")
    results = check_windows(rundir)
    assert all(r.ok for r in results.values()), {sid: r.as_json() for sid, r in results.items()}
    windows = pd.read_parquet(rundir.windows)
    s1 = windows[windows["stream"] == 1].sort_values("window")
    first_new = s1[s1["n_events"] == 6]["window"].min()     # the new epoch's first window
    assert set(s1[s1["window"] >= first_new]["operator"]) == {"o3", "o1"}
    assert set(s1[s1["window"] < first_new]["operator"]) == {"o1", "o2", "o3"}
    assert results[1].reference == len(s1) > 100


def test_a_loss_before_the_switch_counts_once(tmp_path):
    """Events 7, 8 and 200 of the count streams never reach the switch.  The
    switch numbers the rest 0, 1, 2, ... and writes those window ids; the
    reference leaves the lost events out as the switch did, so the loss is
    counted by the frame check and no window after it differs."""
    lose = {(sid, seq) for sid in (1, 3) for seq in (7, 8, 200)}
    topo, rundir = make_run_dir(tmp_path, lose=lose)
    frames = frame_check(rundir.read_record(), rundir)
    assert {sid: r.unseen for sid, r in frames.items() if r.unseen} == {1: [7, 8, 200], 3: [7, 8, 200]}
    assert not frames[1].ok and frames[1].missing == frames[1].extra == 0
    run_app(topo, rundir, "local[2]")
    results = check_windows(rundir)
    assert all(r.ok for r in results.values()), {sid: r.as_json() for sid, r in results.items()}
    # 397 events in tumbling windows of 4: 99 whole windows and a last one of 1 event
    ref = pd.read_parquet(rundir.windows_reference)
    s3 = ref[ref["stream"] == 3].sort_values("window")
    assert len(s3) == 100 and s3["n_events"].tolist() == [4] * 99 + [1]


def test_missing_event_shows_as_incomplete_window(tmp_path):
    topo, rundir = make_run_dir(tmp_path, drop_one=True)
    analysis = run_app(topo, rundir, "local[1]")
    complete = {r["stream"]: (r["complete"], r["windows"]) for r in analysis["completeness"]}
    assert complete[1][0] < complete[1][1] and complete[3][0] == complete[3][1]
    r = check_windows(rundir)[1]
    assert not r.ok
    assert r.incomplete + r.mismatched >= 1 and r.missing == 0


def test_standalone_cluster_on_loopback(tmp_path):
    """spark:// master and worker started with the scripts pyspark ships (bin/spark-class)."""
    topo, rundir = make_run_dir(tmp_path)
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, ui1, ui2 = free_loopback_port(), free_loopback_port(), free_loopback_port()
    env = loopback_env()
    master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui1)], env=env,
                              stdout=open(tmp_path / "master.log", "wb"), stderr=subprocess.STDOUT)
    worker = None
    try:
        deadline = time.monotonic() + 90
        while not port_listening(port):
            assert master.poll() is None and time.monotonic() < deadline, (tmp_path / "master.log").read_text()
            time.sleep(0.3)
        url = f"spark://127.0.0.1:{port}"
        worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                   "--cores", "2", "--memory", "2g", "--webui-port", str(ui2), url], env=env,
                                  stdout=open(tmp_path / "worker.log", "wb"), stderr=subprocess.STDOUT)
        analysis = run_app(topo, rundir, url)
        assert analysis["spark_master"] == url
        assert all(r.ok for r in check_windows(rundir).values())
    finally:
        for p in (worker, master):
            if p is not None:
                p.terminate()
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()


def test_the_live_merger_emits_each_window_once_and_as_the_final_result(tmp_path):
    """Every window leaves through the live merger exactly once: complete by
    its definition while the input lasts, the rest (the stream's last,
    unfinished windows) at its end; a window emitted as complete equals its
    final result, and its result latency is measured from the send of the
    event that completed it."""
    topo, rundir = make_run_dir(tmp_path)
    analysis = run_app(topo, rundir, "local[2]")
    windows = pd.read_parquet(rundir.windows)
    assert windows["emitted_by"].notna().all()
    once = windows.drop_duplicates(["stream", "window"])
    live = pd.concat([pd.read_parquet(p) for p in sorted(rundir.spark_live.glob("*.parquet"))])
    assert live.groupby(["stream", "window"])["emitted_ns"].nunique().max() == 1
    assert len(live.drop_duplicates(["stream", "window"])) == len(once)
    by = once.groupby(["stream", "emitted_by"]).size().unstack(fill_value=0)
    # 400 events a stream: all but the last few windows are complete before the end
    assert (by["complete"] > 10 * by["end of input"]).all(), by
    s3 = once[once["stream"] == 3].sort_values("window")          # count tumbling 4: window j ends with seq 4j+3
    done = s3[s3["emitted_by"] == "complete"]
    assert (done["completing_seq"] == done["window"] * 4 + 3).all()
    assert analysis["live"]["mismatched"] == 0 and analysis["live"]["after_emission"] == 0
    lat = {r["stream"]: r for r in analysis["result_latency_s"]}
    assert set(lat) == {1, 2, 3, 4} and all(r["p50"] > 0 and r["max"] >= r["p99"] for r in lat.values())
    assert set(analysis["live"]["operators"]) == {"o1", "o2", "o3"}
    processed = sum(o["processed"] for o in analysis["live"]["operators"].values())
    assert processed == len(pd.read_parquet(rundir.deliveries))


def test_windows_leave_while_the_input_still_grows(tmp_path):
    """The run's window output is readable mid-run: with only the first
    hand-over of each operator in, windows are already out, marked complete;
    the second hand-over adds more."""
    from testbed.emulation.procs import wait_ready

    topo, rundir = make_run_dir(tmp_path)
    held = tmp_path / "held"
    held.mkdir()
    for part in rundir.spark_in.glob("*/*-000001.parquet"):
        part.rename(held / part.name)
    app = SparkApp(rundir, job_description(topo, "test", rundir), "local[2]")
    app.start()
    try:
        app.wait_ready()

        def emitted() -> pd.DataFrame:
            files = sorted(rundir.spark_live.glob("*.parquet"))
            return pd.concat([pd.read_parquet(p) for p in files]) if files else pd.DataFrame()

        wait_ready(app.proc, lambda: len(emitted()) > 0, "first live windows", 120.0)
        first = emitted()
        assert (first["emitted_by"] == "complete").all()
        assert not rundir.windows.exists()                  # the run's input is not complete yet
        for part in held.iterdir():                         # the second hand-over, renamed in whole
            inbox = rundir.spark_inbox(part.name.split("-")[0])
            (inbox / ("." + part.name)).write_bytes(part.read_bytes())
            (inbox / ("." + part.name)).rename(inbox / part.name)
        wait_ready(app.proc, lambda: emitted()["window"].nunique() > first["window"].nunique(),
                   "more live windows", 120.0)
        record = rundir.read_record()
        app.finish(changes=record.changes, unseen=events_the_switch_never_saw(frame_check(record, rundir)))
    finally:
        app.stop()
    for sid, r in check_windows(rundir).items():
        assert r.ok, (sid, r.as_json())


def test_a_warm_application_serves_runs_one_after_another(tmp_path):
    """One ``SparkService`` takes four runs' jobs: the first is dropped before
    its input is complete (its run ended early), the next two are computed
    on the same application, equal to the reference; then the application
    dies, and the fourth run's job goes to one submitted again.  On stop
    nothing of it is left, its state file included."""
    import os
    import signal

    from testbed.analysis.spark import SparkService
    from testbed.emulation import procs

    service = SparkService(tmp_path / "service", "local[2]", owner_id="test-warm-spark")
    for i in range(4):
        (tmp_path / f"r{i}").mkdir()
    runs = [make_run_dir(tmp_path / f"r{i}") for i in range(4)]

    def served(i: int) -> dict:
        topo, rundir = runs[i]
        app = service.app(rundir, job_description(topo, f"r{i}", rundir))
        app.start()
        app.wait_ready()
        record = rundir.read_record()
        analysis = app.finish(changes=record.changes, unseen=events_the_switch_never_saw(frame_check(record, rundir)))
        for sid, r in check_windows(rundir).items():
            assert r.ok, (i, sid, r.as_json())
        assert "served by the warm Spark application" in rundir.spark_log.read_text()
        return analysis

    try:
        dropped = service.app(runs[0][1], job_description(runs[0][0], "r0", runs[0][1]))
        dropped.start()
        dropped.wait_ready()
        dropped.stop()                          # the run failed before its input was complete
        first, second = served(1), served(2)
        assert first["application_id"] == second["application_id"]
        assert (first["application_runs_before"], second["application_runs_before"]) == (1, 2)
        outcome = runs[0][1].spark_done.read_text()
        assert '"cancelled": true' in outcome and not runs[0][1].windows.exists()
        assert (procs.state_dir() / "test-warm-spark.json").exists()
        died = service.proc.pid
        os.killpg(died, signal.SIGKILL)
        service.proc.wait()
        third = served(3)
        assert third["application_id"] != second["application_id"] and third["application_runs_before"] == 0
        assert procs._start_time(died) is None and service.alive()
        pid = service.proc.pid
    finally:
        service.stop()
    assert not service.alive() and procs._start_time(pid) is None
    assert not (procs.state_dir() / "test-warm-spark.json").exists()
    assert service.describe()["runs_served"] == 4 and service.describe()["restarts"] == 1


#: Two patterns over two streams, each matching a few percent of the events
#: (stream 1's values are NEXMark bid prices, 387 .. 224,527; stream 3's are 0 .. 999).
CEP_RULES = {
    "windows": [{"name": "recent", "stream": 1, "field": "value", "size": 5}],
    "complex_events": [
        {"name": "rise", "id": 3, "stream": 1, "pattern": "[value > 20000]; [max(recent) > 30000 and value < 3000]",
         "returns": "sum(recent)", "sinks": ["sk1"]},
        {"name": "pair", "id": 7, "stream": 3, "strategy": "strict", "sinks": ["sk1", "sk2"],
         "pattern": "[value < 150]; [value >= 700]", "returns": "seq"}]}


def test_spark_computes_the_complex_events_of_the_events_the_switch_saw(tmp_path):
    """With ``cep:`` rules the job writes the complex events of every
    stream a rule reads, one Spark group per stream, over the events the
    switch saw: the ones lost before it are left out, as the switch left
    them out.  They equal the oracle's, per sink and in order; a sink that
    recorded them passes against it, and one that lost a complex event fails."""
    from testbed.analysis.cepcheck import check_against_spark, expected_complex_events
    from testbed.semantics.cep.reference import complex_events, per_sink
    from testbed.semantics.cep.rules import CepRules

    rules = CepRules.model_validate(CEP_RULES)
    _, whole = make_run_dir(tmp_path / "whole", cep=CEP_RULES)
    # lose the events that complete each pattern's first match: the reference must not see them
    first = complex_events(rules, pd.read_parquet(whole.sources)).groupby("pattern").first()
    lose = set(zip(first["stream"], first["seq"]))
    topo, rundir = make_run_dir(tmp_path / "lossy", lose=lose, cep=CEP_RULES)
    run_app(topo, rundir, "local[2]")
    ref = pd.read_parquet(rundir.complex_events_reference)
    assert {3, 7} == set(ref["pattern"]) and set(ref["stream"]) == {1, 3}
    loaded = api.load(rundir.root)
    assert loaded.complex_events_reference.equals(ref) and loaded.complex_events is None   # no sink ran here
    assert not set(zip(ref["stream"], ref["seq"])) & lose
    for pattern, rows in ref.groupby("pattern"):
        assert rows["match"].tolist() == list(range(1, len(rows) + 1)), pattern
    record = rundir.read_record()
    oracle = expected_complex_events(rules, pd.read_parquet(rundir.sources), frame_check(record, rundir))
    spark = per_sink(rules, ref)
    assert spark == oracle and len(spark["sk1"]) > len(spark["sk2"]) > 5
    # A sink's record, as the receivers write it: it passes against Spark's reference, until one event is gone.
    received = pd.DataFrame([dict(zip(("pattern", "match", "stream", "seq", "value"), k), sink=sink,
                                  recv_ns=i, at=0) for sink, keys in spark.items() for i, k in enumerate(keys)])
    assert all(c.ok for c in check_against_spark(rules, ref, received).values())
    cut = check_against_spark(rules, ref, received.drop(index=received.index[received["sink"] == "sk2"][2]))
    assert cut["sk1"].ok and not cut["sk2"].ok and cut["sk2"].missing == 1
