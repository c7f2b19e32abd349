"""Batched streams of the four semantics, changed mid-stream, end to end on
both targets: every run passes ``testbed check``, and the changes' boundaries
fall inside batches (root and Mininet needed; bmv2 where present).

The changes are placed after events of their stream, where the source cuts
its frames and holds; each boundary is the first window start after that
point, which the numbers below put a few events into the next frame.
"""
import pandas as pd
import pytest

from support import topologies
from support.runs import finished_run, run_cli
from testbed.emulation.network import mininet_missing
from testbed.rundir import RunDir
from testbed.targets.bmv2.toolchain import toolchain_missing

pytestmark = pytest.mark.mininet
MISSING = mininet_missing()
OPERATORS = [f"op{i}" for i in range(1, 6)]
EVENTS, RATE = 1200, 800

#: stream id -> (window, events per frame, the change's point, the change, its expected boundary)
STREAMS = {
    # count tumbling 4/4: held after 502 events, the next window starts at event 504
    41: ({"kind": "count", "size": 4, "slide": 4}, 8, 502,
         {"window": {"kind": "count", "size": 6, "slide": 6}, "operators": ["op2", "op4"]}, 504),
    # count sliding 6/3: after 500, the next slide starts at 501
    42: ({"kind": "count", "size": 6, "slide": 3}, 8, 500,
         {"window": {"kind": "count", "size": 5, "slide": 1}, "operators": ["op1", "op3", "op5"]}, 501),
    # time tumbling 100/100 over timestamps 0, 10, 20, ...: after 505 events (ts 5040), the next window at ts 5100
    43: ({"kind": "time", "size": 100, "slide": 100}, 16, 505,
         {"operators": ["op5", "op1"]}, 5100),
    # time sliding 300/200 with late events: after 503 events, the next slide starts at ts 5200 or later
    44: ({"kind": "time", "size": 300, "slide": 200, "lateness": 200}, 16, 503,
         {"window": {"kind": "time", "size": 400, "slide": 200, "lateness": 200}}, None),
}


def batched_changing_topology(tmp_path, switch: str):
    streams, schedule = [], []
    for sid, (window, k, point, change, _boundary) in STREAMS.items():
        data = topologies.stream(sid, window, OPERATORS[:4], source="src", events=EVENTS, rate=RATE,
                                 timestamps={"start": 0, "step": 10})
        data["batch"] = {"events": k, "max_delay": 0.01}
        if window.get("lateness"):
            data["perturb"] = {"disorder": {"fraction": 0.05, "max_delay": 250}}
        streams.append(data)
        schedule.append({"after": {"stream": sid, "events": point}, "change": {"stream": sid, **change}})
    data = topologies.topology_data(streams, ["src"] + OPERATORS, name="bl" + switch, switch=switch)
    data["schedule"] = schedule
    return topologies.write(tmp_path / "topo.yaml", data)


@pytest.mark.skipif(MISSING is not None, reason=f"emulation skipped: {MISSING}")
@pytest.mark.parametrize("target", ["model", pytest.param("bmv2", marks=pytest.mark.skipif(
    toolchain_missing() is not None, reason=f"bmv2 toolchain: {toolchain_missing()}"))])
def test_batched_streams_pass_their_check_with_changes_inside_batches(tmp_path, target):
    out = tmp_path / "run"
    record = finished_run(batched_changing_topology(tmp_path, "b" + target[0]), out, target)
    assert record["ok"] is True
    sources = pd.read_parquet(RunDir(out).sources)
    for sid, (_window, _k, _point, _change, boundary) in STREAMS.items():
        acct = record["accounting"]["streams"][str(sid)]
        assert acct["sent"] == EVENTS and acct["lost"] == 0, acct
        assert record["check"][str(sid)]["ok"], record["check"][str(sid)]
        (change,) = record["changes"][str(sid)]
        assert change["epoch"] == 1
        if boundary is None:
            assert change["start"] >= 5200
            continue
        assert change["start"] == boundary
        # The boundary's event and the one before it left in one frame: the change fell inside a batch.
        sent = sources[sources["stream"] == sid].set_index("seq")
        at = boundary if sid in (41, 42) else boundary // 10
        assert sent.loc[at, "frame"] == sent.loc[at - 1, "frame"]
    # Stream 44 sent late events, inside its batches.
    late = sources[sources["stream"] == 44].sort_values("send_ns")["ts"]
    assert (late < late.cummax().shift(fill_value=0)).sum() > 10
    chk = run_cli("check", str(out))
    assert chk.returncode == 0 and all(f"stream {sid}: OK" in chk.stdout for sid in STREAMS), chk.stdout
