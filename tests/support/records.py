"""Run records for tests that judge hand-made raw data: only what the check reads is real."""
from typing import Any

from testbed.rundir import RunRecord


def record_of(streams: dict[str, dict[str, Any]], **facts: Any) -> RunRecord:
    """A ``RunRecord`` with ``streams`` (as run.json keeps them) and ``facts``
    (``switch``, ``changes``, ``adaptation``...); the rest are placeholders the
    check never reads."""
    operators = sorted({op for s in streams.values() for op in s.get("operators", ())})
    base = dict(name="test", run_id="r", target="model", topology_file="t.yaml", seed=1, start=0.0,
                git_revision="x", versions={}, command=[], streams=streams, operator_hosts=operators,
                switch_ports={}, topology={})
    return RunRecord(**{**base, **facts})


def switch_saw(stream: int, accepted: int, out: int = 0) -> dict[str, Any]:
    """The ``switch`` fact of a run whose switch accepted ``accepted`` events of ``stream``."""
    return {"streams": {str(stream): {"in": accepted, "out": out, "dropped": {}}}, "ports": {}, "non_event": 0}


def written(rundir) -> dict[str, Any]:
    """Everything a run wrote of itself, as JSON: its facts (run.json) and,
    once it was checked, its verdicts (verdicts.json) under their own keys."""
    from testbed.rundir.record import dump

    out = dump(rundir.read_record())
    verdicts = rundir.read_verdicts()
    return {**out, **(dump(verdicts) if verdicts is not None else {})}
