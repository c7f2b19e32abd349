"""The typed run record: facts in run.json, verdicts in verdicts.json, both strict."""
import json

import pytest
from click.testing import CliRunner
from test_inputs import finished_run

from support import topologies
from support.records import record_of, switch_saw
from testbed.cli import main
from testbed.rundir import RunDir, RunDirError, RunRecord, write_json_atomic
from testbed.rundir.record import FORMAT, dump
from testbed.rundir.schema import markdown

pytestmark = pytest.mark.unit


def stream_record():
    topo = topologies.build([topologies.stream(3, {"kind": "count", "size": 3, "slide": 1}, ["h2", "h3"])], 3)
    return topo.streams[0].record()


def test_a_record_round_trips_with_the_files_spelling(tmp_path):
    rundir = RunDir(tmp_path / "r").create()
    record = record_of({"3": stream_record()}, switch=switch_saw(3, 30, 60))
    rundir.write_record(record)
    on_disk = json.loads(rundir.record.read_text())
    assert on_disk["format"] == FORMAT and on_disk["switch"]["streams"]["3"]["in"] == 30
    assert "error" not in on_disk                       # unset optionals are left out
    again = rundir.read_record()
    assert again == record and again.switch.streams["3"].accepted == 30


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(colour="blue"), "run.json: colour: unknown key"),
    (lambda d: d.pop("target"), "run.json: target: missing"),
    (lambda d: d.update(seed="one"), "run.json: seed: Input should be a valid integer"),
    (lambda d: d["switch"]["streams"]["3"].update(extra=1), "run.json: switch.streams.3.extra: unknown key"),
])
def test_an_unknown_missing_or_mistyped_key_is_refused_with_file_and_key(tmp_path, change, message):
    rundir = RunDir(tmp_path / "r").create()
    data = dump(record_of({"3": stream_record()}, switch=switch_saw(3, 30)))
    change(data)
    write_json_atomic(rundir.record, data)
    with pytest.raises(RunDirError) as err:
        rundir.read_record()
    assert str(err.value).startswith(f"{rundir.root}/{message}") and "\n" not in str(err.value)


def test_assignments_are_checked_as_the_run_writes():
    record = record_of({})
    with pytest.raises(ValueError):
        record.stream_end = ["not", "text"]


def test_a_run_written_before_the_split_still_loads(tmp_path):
    """Earlier runs kept their verdicts in run.json and had no format key."""
    rundir = finished_run(tmp_path)
    assert CliRunner().invoke(main, ["check", str(rundir.root)]).exit_code == 0
    old = {**json.loads(rundir.record.read_text()), **json.loads(rundir.verdicts.read_text())}
    for key in ("format", "checked_at", "windows_not_computed", "not_applied"):
        old.pop(key, None)
    write_json_atomic(rundir.record, old)
    rundir.verdicts.unlink()
    assert rundir.read_record().name == "t"
    legacy = rundir.read_verdicts()
    assert legacy is not None and legacy.ok and legacy.check["3"].sent == 30


def test_check_rewrites_the_verdicts_and_never_the_facts(tmp_path):
    rundir = finished_run(tmp_path)
    facts = rundir.record.read_bytes()
    result = CliRunner().invoke(main, ["check", str(rundir.root)])
    assert result.exit_code == 0 and "stream 3: OK" in result.output
    first = json.loads(rundir.verdicts.read_text())
    assert first["ok"] is True and first["accounting"]["streams"]["3"]["sent"] == 30
    assert rundir.record.read_bytes() == facts
    # a delivery goes missing: the check judges again, the facts stay as the run wrote them
    import pandas as pd
    pd.read_parquet(rundir.deliveries).iloc[1:].to_parquet(rundir.deliveries)
    assert CliRunner().invoke(main, ["check", str(rundir.root)]).exit_code == 1
    assert json.loads(rundir.verdicts.read_text())["ok"] is False
    assert rundir.record.read_bytes() == facts


def test_the_schema_documents_every_key_of_both_files():
    text = markdown()
    for name in RunRecord.model_fields:
        assert f"`{name}`" in text
    assert "`in`" in text and "#### `verdicts.json`" in text and "##### `FrameVerdict`" in text
