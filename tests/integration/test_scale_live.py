"""S4's scale, live and quick: operator instances on shared hosts and stream
families through whole runs on both targets (issue 43).  Properties, never
timings: every event where the oracle says, every instance reached, the
plan installed whole, and the experiment's figure drawn again from its raw data.
"""
from __future__ import annotations

import pandas as pd
import pytest

from support import topologies
from support.runs import finished_run
from testbed import ROOT
from testbed.emulation.network import mininet_missing
from testbed.experiments.base import Settings, load_experiment, redraw, run_experiment
from testbed.rundir import RunDir
from testbed.semantics.topology import parse_topology
from testbed.targets.bmv2 import toolchain

MISSING_BMV2 = toolchain.toolchain_missing()
pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(mininet_missing() is not None, reason=f"emulation: {mininet_missing()}")]
TARGETS = [
    "model",
    pytest.param("bmv2", marks=[pytest.mark.bmv2, pytest.mark.skipif(MISSING_BMV2 is not None,
                                                                     reason=f"bmv2 toolchain: {MISSING_BMV2}")]),
]


@pytest.mark.parametrize("target", TARGETS)
def test_s4scale_quick_checks_every_event_at_each_n(tmp_path, target):
    config = Settings(quick=True, target=target, switch_name="e6")
    spec, params = load_experiment(ROOT / "experiments" / "s4scale.yaml", config)
    ok, expdir = run_experiment(spec, params, config, tmp_path / "s4scale")
    record = expdir.read_record()
    points = record["ours"]["points"]
    instances = [p for p in points if p["sweep"] == "instances"]
    streams = [p for p in points if p["sweep"] == "streams"]
    assert ok and [p["N"] for p in instances] == params.n_values and {p["target"] for p in points} == {target}
    assert [p["streams"] for p in streams] == params.stream_values
    for p in points:
        assert p["check_passes"] and p["exit"] == 0 and p["lost"] == 0, p
        assert p["instances_without_copies"] == 0 and p["copies_min"] > 0
        assert p["installed_entries"] == p["plan_entries"] and p["installed_groups"] == p["plan_groups"]
        assert p["peak_memory_mib"] > 0 and p["setup_s"] > 0
        delivered = pd.read_parquet(RunDir(expdir.root / p["run_dir"]).deliveries)
        operators = delivered["operator"].unique()
        assert len(operators) == p["N"] and all("." in op for op in operators)
        assert delivered["stream"].nunique() == p["streams"]
    # streams share one operator set: each costs its two entries, and the set is there once
    assert streams[-1]["installed_entries"] - streams[0]["installed_entries"] == \
        2 * (streams[-1]["streams"] - streams[0]["streams"])
    figures = [expdir.root / f for f in record["figures"]]
    for f in figures:
        f.unlink()
    assert sorted(redraw(expdir)) == sorted(figures) and all(f.exists() for f in figures)


@pytest.mark.parametrize("target", TARGETS)
def test_a_family_of_streams_over_instances_runs_like_its_members_written_out(tmp_path, target):
    """64 streams of four window kinds from two sources, over 8 instances on two
    hosts and one whole host: every stream's events where the oracle says."""
    family = {"family": {"count": 64, "sources": ["h1", "h5"],
                         "windows": [{"kind": "count", "size": 3, "slide": 3}, {"kind": "count", "size": 4, "slide": 2},
                                     {"kind": "time", "size": 5, "slide": 5}, {"kind": "time", "size": 6, "slide": 3}]},
              "id": 100, "operators": ["h2", "h3", "h4"], "events": 40, "rate": 20,
              "timestamps": {"start": 0, "step": 1}}
    data = topologies.topology_data([family], 5, name="fam", switch="e5")
    data["hosts"].update({"h2": {"instances": 4}, "h3": {"instances": 4}})
    topo = parse_topology(data)
    path = topologies.write(tmp_path / "fam.yaml", data)
    run = finished_run(path, tmp_path / "run", target)
    assert run["ok"] is True
    streams = run["accounting"]["streams"]
    assert sorted(map(int, streams)) == list(range(100, 164))
    assert all(s["lost"] == 0 and s["sent"] == 40 for s in streams.values())
    delivered = pd.read_parquet(RunDir(tmp_path / "run").deliveries)
    assert set(delivered["operator"]) == set(topo.streams[0].operators) and len(topo.streams[0].operators) == 9
    assert len(delivered) == run["expected_deliveries"]


@pytest.mark.parametrize("target", TARGETS)
def test_n_shrinks_and_grows_back_over_shared_hosts_in_stream_terms(tmp_path, target):
    """s4adapt's quick variant: N = 64 -> 48 -> 64 mid-stream over four hosts of
    16 instances, each change at a fixed event; every event where the oracle says."""
    data = {"name": "adaptq", "switch": {"name": "e4"},
            "hosts": {"h1": {}, **{f"h{i}": {"instances": 16} for i in range(2, 6)}},
            "streams": [{"id": 1, "source": "h1", "window": {"kind": "count", "size": 4, "slide": 4},
                         "operators": ["h2", "h3", "h4", "h5"], "events": 2400, "rate": 1200}],
            "schedule": [{"after": {"stream": 1, "events": 800},
                          "change": {"stream": 1, "operators": ["h2", "h3", "h4"]}},
                         {"after": {"stream": 1, "events": 1600},
                          "change": {"stream": 1, "operators": ["h2", "h3", "h4", "h5"]}}]}
    path = topologies.write(tmp_path / "adapt.yaml", data)
    run = finished_run(path, tmp_path / "run", target)
    assert run["ok"] is True and run["accounting"]["streams"]["1"]["lost"] == 0
    changes = run["changes"]["1"]
    assert [(c["boundary"], len(c["operators"])) for c in changes] == [(800, 48), (1600, 64)]
    delivered = pd.read_parquet(RunDir(tmp_path / "run").deliveries)
    middle = delivered[(delivered["seq"] >= 800) & (delivered["seq"] < 1600)]
    assert middle["operator"].nunique() == 48 and not middle["operator"].str.startswith("h5.").any()
    assert delivered[delivered["seq"] >= 1600]["operator"].nunique() == 64
