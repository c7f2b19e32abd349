"""``testbed report``: the docs' generated parts come from results files, and only those parts change."""
import io
import json
from pathlib import Path

import pytest

from testbed.experiments.report import MAX_ROWS, newest_result, report, rewrite, section

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def experiment(root: Path, name: str, ours: dict, started: float = 1.7e9, ok: bool = True) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "experiment.json").write_text(json.dumps({
        "kind": "resources", "experiment": {"name": name}, "started": started, "ended": started + 60,
        "git_revision": "abcdef0123456", "quick": False,
        "ok": ok, "paper": {"s4_fig7": {"source": "S4, Fig. 7", "max_operators": 457000}}, "ours": ours,
        "skipped": {"compiled": "p4c not found"}}))
    return folder


def doc(tmp_path: Path, names: list[str]) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    body = "# Evaluation\n\nprose that stays\n\n" + "".join(
        f"<!-- BEGIN generated: {n} -->\nold text 42\n<!-- END generated: {n} -->\n\n" for n in names)
    (docs / "evaluation.md").write_text(body)
    return docs


def test_the_numbers_come_from_the_newest_results(tmp_path):
    results = tmp_path / "results"
    experiment(results / "s4resources", "20260101-000000", {"entries_at_1024": 1})
    newest = experiment(results / "s4resources", "20260102-000000", {"entries_at_1024": 2050,
                                                                     "rows": list(range(50))})
    docs = doc(tmp_path, ["s4resources", "s4amp"])
    assert report(docs=docs, results=results, names=["s4resources", "s4amp"]) == [docs / "evaluation.md"]
    text = (docs / "evaluation.md").read_text()
    assert "prose that stays" in text and text.count("old text 42") == 1
    assert "20260102-000000/experiment.json" in text and "skipped compiled: p4c not found" in text
    # the key/value dump went to the results' own file, whole
    assert "| key | value |" not in text and "entries_at_1024" not in text
    numbers = (newest / "numbers.md").read_text()
    assert "| `entries_at_1024` | 2050 |" in numbers and "| `rows` | [0, 1, 2," in numbers
    assert "S4, Fig. 7" in numbers and "| `max_operators` | 457000 |" in numbers
    # no result here: the text an earlier machine's results wrote stays, never an invented number
    assert "<!-- BEGIN generated: s4amp -->\nold text 42\n" in text
    (tmp_path / "fresh").mkdir()
    blank = doc(tmp_path / "fresh", ["s4amp"])
    (blank / "evaluation.md").write_text((blank / "evaluation.md").read_text().replace("old text 42\n", ""))
    assert report(docs=blank, results=results, names=["s4amp"]) == [blank / "evaluation.md"]
    assert "Not run yet: `make experiment NAME=s4amp`" in (blank / "evaluation.md").read_text()
    # --check: the docs now match; a newer result makes them differ, and nothing is written
    assert report(check=True, docs=docs, results=results, names=["s4resources", "s4amp"]) == []
    experiment(results / "s4amp", "20260103-000000", {"capacity": 4000.5})
    before = (docs / "evaluation.md").read_text()
    assert report(check=True, docs=docs, results=results, names=["s4resources", "s4amp"]) != []
    assert (docs / "evaluation.md").read_text() == before


def test_an_experiment_that_has_not_ended_well_leaves_the_last_good_numbers(tmp_path):
    results = tmp_path / "results"
    good = experiment(results / "s4amp", "20260101-000000", {"capacity": 4000.5})
    running = experiment(results / "s4amp", "20260102-000000", {})
    record = json.loads((running / "experiment.json").read_text())
    del record["ended"]
    (running / "experiment.json").write_text(json.dumps(record))
    failed = experiment(results / "s4amp", "20260103-000000", {})
    record = json.loads((failed / "experiment.json").read_text())
    (failed / "experiment.json").write_text(json.dumps(dict(record, error="RunError: the switch died")))
    assert newest_result("s4amp", results).root == good.resolve()
    # with nothing that ended well, the newest is taken, to be named for what is wrong with it
    good_json = good / "experiment.json"
    good_json.write_text("{not json")
    assert newest_result("s4amp", results).root == failed.resolve()


def test_make_figures_results_come_first(tmp_path):
    results = tmp_path / "results"
    experiment(results / "s4load", "20990101-000000", {"x": 1})
    experiment(results / "figures", "s4load", {"x": 2})
    assert newest_result("s4load", results).root == (results / "figures" / "s4load").resolve()


def test_a_record_of_another_shape_still_gets_the_papers_claim_and_its_verdict(tmp_path):
    results = tmp_path / "results"
    experiment(results / "e", "1", {f"k{i}": i for i in range(MAX_ROWS + 5)}, ok=False)
    text = section("e", newest_result("e", results), tmp_path)
    assert text.startswith("**The paper.** ") and "**Verdict: not comparable**" in text
    assert "did NOT pass its checks" in text and "The table is missing: this record's shape" in text
    assert "| key | value |" not in text


def control_record(root: Path, means: dict[tuple[str, int], float]) -> Path:
    """An s4control result: its record and a figure, as the kind writes them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = experiment(root / "s4control", "20260101-000000", {"summary_ms": [
        {"target": "model", "semantic": sem, "N": n, "mean": mean, "operations": 3 * n + (n if sem == "sliding"
                                                                                          else 0)}
        for (sem, n), mean in means.items()]})
    record = json.loads((folder / "experiment.json").read_text())
    record.update(kind="control", figures=["s4_fig9.png"], paper={"s4_fig9": {
        "source": "S4, §V-B3c and Fig. 9", "repeat": 100, "finding": "grows with N"}})
    (folder / "experiment.json").write_text(json.dumps(record))
    fig, ax = plt.subplots(figsize=(12, 5))
    ax.plot([1, 2, 3], [3, 1, 2])
    fig.savefig(folder / "s4_fig9.png", dpi=200)
    plt.close(fig)
    return folder


def test_a_section_reads_claim_figure_table_verdict_in_that_order(tmp_path):
    results = tmp_path / "results"
    control_record(results, {("tumbling", 1): 0.2, ("sliding", 1): 0.3, ("tumbling", 64): 2.0,
                             ("sliding", 64): 9.0})
    docs = doc(tmp_path, ["s4control"])
    assert report(docs=docs, results=results, names=["s4control"]) == [docs / "evaluation.md",
                                                                       docs / "figures" / "s4control.png"]
    text = (docs / "evaluation.md").read_text()
    order = ["**The paper.** S4 Fig. 9:", "![s4control: our figure", "| case | paper | ours | how they relate |",
             "| N = 64 (model) | plotted only: grows with N, sliding above tumbling | tumbling 2 ms, sliding 9 ms",
             "sliding ×4.5 tumbling |", "**Verdict: holds**", "From `results/s4control/"]
    assert [text.index(part) for part in order] == sorted(text.index(part) for part in order)
    figure = docs / "figures" / "s4control.png"
    assert "](figures/s4control.png)" in text and 0 < figure.stat().st_size < 150_000
    assert report(check=True, docs=docs, results=results, names=["s4control"]) == []
    # a figure in the docs that is not the results' is a difference --check reports, and keeps
    figure.write_bytes(b"stale")
    assert report(check=True, docs=docs, results=results, names=["s4control"]) == [figure]
    assert figure.read_bytes() == b"stale"


def test_the_verdict_follows_the_numbers(tmp_path):
    results = tmp_path / "results"
    control_record(results, {("tumbling", 1): 0.2, ("sliding", 1): 0.3, ("tumbling", 64): 2.0,
                             ("sliding", 64): 1.0})
    text = section("s4control", newest_result("s4control", results), tmp_path, {})
    assert "**Verdict: differs**: model: sliding below tumbling at N = 64." in text


def test_no_case_measured_is_no_claim_held(tmp_path):
    """An experiment still running (its record has no points yet) must not read as holding."""
    results = tmp_path / "results"
    control_record(results, {})
    text = section("s4control", newest_result("s4control", results), tmp_path, {})
    assert "**Verdict: not comparable**: these results measured no case the paper reports." in text


def test_a_section_left_as_a_key_value_dump_keeps_only_where_it_came_from(tmp_path):
    docs = doc(tmp_path, ["s4load", "s4amp"])
    old = ("From `results/figures/s4load/experiment.json` (2026-11-24 08:22 UTC, revision baba886401, full size): "
           "passed its checks.\n\nOurs:\n\n| key | value |\n|---|---|\n| `runs.cbtw1.ok` | True |\n")
    text = (docs / "evaluation.md").read_text()
    (docs / "evaluation.md").write_text(text.replace("old text 42\n", old, 1))
    assert report(docs=docs, results=tmp_path / "results", names=["s4load", "s4amp"]) == [docs / "evaluation.md"]
    text = (docs / "evaluation.md").read_text()
    assert "| key | value |" not in text and "revision baba886401" in text
    assert "`make experiment NAME=s4load` and then `testbed report` write them here" in text
    assert "<!-- BEGIN generated: s4amp -->\nold text 42\n" in text


def test_text_outside_the_markers_is_never_touched():
    text = "a\n<!-- BEGIN generated: x -->\nold\n<!-- END generated: x -->\nb <!-- BEGIN generated: y -->"
    assert rewrite(text, {"x": "new\n"}) == text.replace("old\n", "new\n")


def test_the_shipped_evaluation_has_no_key_value_dump_and_small_figures():
    """Issue 44: a reader sees the paper's claim, our figure, a table and a verdict;
    every figure the docs show is there, and small enough for the repository."""
    text = (ROOT / "docs" / "evaluation.md").read_text()
    assert "| key | value |" not in text
    shown = [line.split("](")[1].rstrip(")") for line in text.splitlines() if line.startswith("![")]
    assert shown and all((ROOT / "docs" / path).is_file() for path in shown)
    for png in (ROOT / "docs" / "figures").glob("*.png"):
        assert png.stat().st_size < 150_000, png


def test_the_shipped_docs_carry_the_generated_record_schema():
    """docs/results.md's schema is what the models give today (rewritten by testbed report)."""
    from testbed.rundir.schema import markdown

    assert markdown() in (ROOT / "docs" / "results.md").read_text()


def test_the_readme_is_short_and_its_documents_exist():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    listed = [line.split("`")[1] for line in readme.splitlines() if line.startswith("| `docs/")]
    assert len(listed) >= 8 and all((ROOT / path).is_file() for path in listed)
    # its headline figures are the ones testbed report keeps in docs/figures/
    shown = [line.split("](")[1].rstrip(")") for line in readme.splitlines() if line.startswith("![")]
    assert 2 <= len(shown) <= 3 and all(path.startswith("docs/figures/") and (ROOT / path).is_file()
                                        for path in shown)


def test_the_stability_table_comes_from_each_stress_runs_file(tmp_path):
    """One row per make stress run, oldest first, from its stability.json: what
    it repeated and how often; a failed test, a verdict that did not pass every
    repetition and a repetition that ended in an error are named; a damaged
    file says so instead of a row of numbers."""
    from testbed.experiments.repeat import Stability
    from testbed.experiments.report import stress_section
    from testbed.experiments.stress import StressReport, SuiteRun

    results = tmp_path / "results"
    assert stress_section(results).startswith("Not run yet: `make stress`")
    flaky, steady, broken = Stability("cbsw1"), Stability("cbtw1"), Stability("elastic")
    for ok in (True, False, True):
        flaky.add({"ok": ok, "check.291.ok": True}, None, 1.0)
        steady.add({"ok": True}, None, 1.0)
    broken.add({"ok": True}, None, 1.0)
    broken.add({}, "RuntimeError: no switch", 1.0)
    suite = [SuiteRun({"passed": 9}, [], 60, 0), SuiteRun({"passed": 8, "failed": 1}, ["tests/t.py::test_x[1]"], 60, 1)]
    runs = {"20260101-000000": StressReport({"workers": 2, "percent": 50}, suite=suite),
            "20260102-000000": StressReport({"workers": 2, "percent": 50}, scenarios={"cbsw1": flaky, "cbtw1": steady},
                                            setup={"revision": "0123456789abcdef", "target": "bmv2", "spark": True}),
            "20260102-100000": StressReport({"workers": 2, "percent": 50}, experiments={"elastic": broken},
                                            setup={"revision": "fedcba9876543210", "spark": False, "quick": True})}
    for name, run in runs.items():
        (results / "stress" / name).mkdir(parents=True)
        (results / "stress" / name / "stability.json").write_text(json.dumps(run.as_json()))
    (results / "stress" / "20260103-000000").mkdir()
    (results / "stress" / "20260103-000000" / "stability.json").write_text('{"suite": [')
    rows = stress_section(results).splitlines()[2:]
    assert rows == [
        "| `20260101-000000` | not recorded | - | - | 1 of 2 | test_x[1] | - | - |",
        "| `20260102-000000` | 0123456789 | 2 scenarios × 3 | bmv2, Spark on | - | - | 2 of 3 | cbsw1 `ok` 2 of 3 |",
        "| `20260102-100000` | fedcba9876 | 1 experiment (quick) × 2 | each one's own target, Spark off | - | - "
        "| 0 of 1 | elastic `ok` 1 of 2; 1 repetitions ended in an error |",
        "| `20260103-000000` | unreadable stability.json | | | | | | |"]
    assert "Revision 0123456789ab; scenarios on bmv2, Spark on." in runs["20260102-000000"].markdown()
    text = runs["20260102-100000"].markdown()
    assert "Spark off; experiments at their small size (--quick)." in text
    assert "## Experiments" in text and "| elastic | `ok` | 1 of 2 | FLAKY |" in text
    assert "| elastic | repetition 2 ended in an error | | RuntimeError: no switch |" in text


def write_bench(results, name: str, revision: str, ours: dict) -> None:
    """A bench's experiment.json with ``ours`` as its parts' summaries, started at the epoch."""
    folder = results / "bench" / name
    folder.mkdir(parents=True)
    (folder / "experiment.json").write_text(json.dumps({
        "kind": "bench", "experiment": {"name": "bench"}, "git_revision": revision, "started": 0, "ours": ours}))


def test_the_instruction_table_puts_each_bench_beside_the_one_before(tmp_path):
    """bmv2's instructions per event from every bench that counted them, oldest
    first, a column per program counted (its newest bench): a case one bench
    did not count shows '-'; benches without the part are left out."""
    from testbed.experiments.report import instructions_section

    results = tmp_path / "results"
    assert instructions_section(results).startswith("Not run yet: `make bench`")

    tumbling = {"target": "bmv2", "program": "splitter", "workload": "count tumbling 100/100"}
    forward = {"target": "bmv2", "program": "forward", "workload": "any", "p4_revision": "dddddddddddd4"}
    write_bench(results, "20260101-000000", "aaaaaaaaaaaa1",
                {"instructions": [tumbling | {"instructions_per_event": 296606}]})
    write_bench(results, "20260102-000000", "bbbbbbbbbbbb2", {"oracle": {"events_per_s": 1.0}})
    write_bench(results, "20260103-000000", "cccccccccccc3", {"instructions": [
        tumbling | {"instructions_per_event": 205317, "p4_revision": "dddddddddddd4"},
        forward | {"instructions_per_event": 49133}]})
    # a bench that names the commit of its p4/ is headed by it; an older one by its checkout's revision
    assert instructions_section(results).splitlines() == [
        "| program | workload | `results/bench/20260101-000000`, p4/ of aaaaaaaaaa "
        "| `results/bench/20260103-000000`, p4/ of dddddddddd |",
        "|---|---|---|---|",
        "| splitter | count tumbling 100/100 | 296,606 | 205,317 |",
        "| forward | any | - | 49,133 |"]
    # the same program counted again: its newest bench stands for it, in its place
    write_bench(results, "20260104-000000", "eeeeeeeeeeee5", {"instructions": [
        tumbling | {"instructions_per_event": 205400, "p4_revision": "dddddddddddd4"}]})
    assert instructions_section(results).splitlines()[0] == (
        "| program | workload | `results/bench/20260101-000000`, p4/ of aaaaaaaaaa "
        "| `results/bench/20260104-000000`, p4/ of dddddddddd |")
    assert "| splitter | count tumbling 100/100 | 296,606 | 205,400 |" in instructions_section(results)


def test_a_kind_with_its_own_table_gets_it_after_the_verdict(tmp_path):
    results = tmp_path / "results"
    folder = experiment(results / "p4cep", "1", {"summary": [
        {"target": "bmv2", "n": 0, "samples": 9, "p50_us": 217.4, "p99_us": 454.0, "events_per_s": 10006.9,
         "rounds": 1, "relative_throughput": 0.103, "forward_send_bound": True}]})
    record = json.loads((folder / "experiment.json").read_text())
    (folder / "experiment.json").write_text(json.dumps({**record, "kind": "cep"}))
    text = section("p4cep", newest_result("p4cep", results), tmp_path)
    assert "| bmv2 | 0 | 217 | 454 | 10,007 | ≤ 10.3 % |  |  | 512 µs |" in text
    assert text.index("**Verdict") < text.index("Fig. 4, ours beside")
    # a kind without its own table, or a record whose kind is unknown, has none
    for kind in ("resources", "no-such-kind"):
        (folder / "experiment.json").write_text(json.dumps({**record, "kind": kind}))
        assert "Fig. 4" not in section("p4cep", newest_result("p4cep", results), tmp_path)


def test_the_instruction_table_says_what_share_of_a_cep_programs_cost_forwarding_is(tmp_path):
    """Under the table, from the newest bench that counted them: each forwarding
    baseline's instructions per event as a share of each CEP program's, the
    most that program's throughput can be of forwarding's; nothing without both."""
    from testbed.experiments.report import floor_shares, floor_verdict, instructions_section

    rows = [{"program": "forward", "workload": "any", "instructions_per_event": 46_000},
            {"program": "forward_events", "workload": "any", "instructions_per_event": 55_000},
            {"program": "cep_floor", "workload": "p4cep", "instructions_per_event": 92_000},
            {"program": "splitter_cep", "workload": "p4cep", "instructions_per_event": 460_000}]
    assert floor_shares(rows) == (
        "plain forwarding 50.0% of the least CEP stage (`cep_floor`) and 10.0% of the CEP build (`splitter_cep`); "
        "forwarding that reads the event 59.8% of the least CEP stage (`cep_floor`) and 12.0% of the CEP build "
        "(`splitter_cep`)")
    assert floor_shares(rows[:2]) is None and floor_shares(rows[2:]) is None
    assert floor_shares([rows[0], rows[3]]) == "plain forwarding 10.0% of the CEP build (`splitter_cep`)"
    folder = tmp_path / "results" / "bench" / "20260101-000000"
    folder.mkdir(parents=True)
    (folder / "experiment.json").write_text(json.dumps({
        "kind": "bench", "experiment": {"name": "bench"}, "git_revision": "a" * 40, "ours": {"instructions": rows}}))
    last = instructions_section(tmp_path / "results").splitlines()[-1]
    assert last.startswith("In `results/bench/20260101-000000`, forwarding's instructions per event as a share")
    assert last.endswith(f": {floor_shares(rows)}. Issue 22's bmv2 target, throughput at 80% of plain "
                         "forwarding, is beyond the least CEP stage's share.")
    assert floor_verdict([rows[0], rows[2] | {"instructions_per_event": 57_000}]).endswith("is within the least "
                                                                                          "CEP stage's share.")
    assert floor_verdict(rows[1:]) == ""


def test_a_stress_run_joins_the_rows_earlier_machines_left_in_the_docs(tmp_path):
    """results/ is not committed: this machine's stress runs are written beside
    the rows the docs have from runs that are not here, in the order of their
    folders' names (when they began); a run that is here is written afresh."""
    from testbed.experiments.report import STRESS
    from testbed.experiments.stress import StressReport, SuiteRun

    docs, results = doc(tmp_path, [STRESS]), tmp_path / "results"
    header = "| results | revision | repeated | on | suite runs passed | tests that failed | verdicts passed " \
             "every time | verdicts that did not |\n|---|---|---|---|---|---|---|---|\n"
    earlier = ["| `20260101-000000` | aaaa | - | - | 1 of 1 | - | - | - |",
               "| `20260105-000000` | bbbb | - | - | 0 of 1 | test_y | - | - |"]
    text = (docs / "evaluation.md").read_text().replace("old text 42\n", header + "\n".join(earlier) + "\n")
    (docs / "evaluation.md").write_text(text)
    for name, passed in (("20260103-000000", True), ("20260105-000000", True)):
        (results / "stress" / name).mkdir(parents=True)
        run = StressReport({"workers": 2, "percent": 50}, suite=[SuiteRun({"passed": 9}, [], 60, 0 if passed else 1)])
        (results / "stress" / name / "stability.json").write_text(json.dumps(run.as_json()))
    assert report(docs=docs, results=results, names=[]) == [docs / "evaluation.md"]
    rows = [line for line in (docs / "evaluation.md").read_text().splitlines() if line.startswith("| `")]
    assert rows == [earlier[0],
                    "| `20260103-000000` | not recorded | - | - | 1 of 1 | - | - | - |",
                    "| `20260105-000000` | not recorded | - | - | 1 of 1 | - | - | - |"]
    assert report(check=True, docs=docs, results=results, names=[]) == []


def test_a_machine_without_stress_runs_or_benches_keeps_the_tables_the_docs_have(tmp_path):
    """results/ is not committed: a report on a machine with no stress run
    and no bench of its own must not wipe the tables an earlier machine's
    results wrote; once it has a bench, that table is written from it."""
    from testbed.experiments.report import INSTRUCTIONS, STRESS

    docs, results = doc(tmp_path, [STRESS, INSTRUCTIONS]), tmp_path / "results"
    assert report(docs=docs, results=results, names=[]) == []
    assert report(docs=docs, results=results, names=[STRESS]) == []      # --only stress: not an experiment
    assert (docs / "evaluation.md").read_text().count("old text 42") == 2
    folder = results / "bench" / "20260101-000000"
    folder.mkdir(parents=True)
    (folder / "experiment.json").write_text(json.dumps({
        "kind": "bench", "experiment": {"name": "bench"}, "git_revision": "a" * 40, "ours": {"instructions": [
            {"target": "bmv2", "program": "splitter", "workload": "w", "instructions_per_event": 1234}]}}))
    assert report(docs=docs, results=results, names=[]) == [docs / "evaluation.md"]
    text = (docs / "evaluation.md").read_text()
    assert text.count("old text 42") == 1 and "| splitter | w | 1,234 |" in text


def test_the_stalled_input_table_comes_from_the_newest_bench_that_measured_it(tmp_path):
    """One row per target and port setup, from the newest bench with the
    stalled_input part; benches without it are passed over."""
    from testbed.experiments.report import stalled_section

    results = tmp_path / "results"
    assert stalled_section(results).startswith("Not run yet: `make bench`")

    row = {"target": "bmv2", "ports": "as the testbed starts it", "burst": 4000, "rate": 20000.0}
    write_bench(results, "20260101-000000", "a" * 40, {"stalled_input": [row | {"kept": 33, "lost": 3967}]})
    write_bench(results, "20260102-000000", "b" * 40, {"stalled_input": [row | {"kept": 1312, "lost": 2688}]})
    write_bench(results, "20260103-000000", "c" * 40, {"oracle": {"events_per_s": 1.0}})
    assert stalled_section(results).splitlines() == [
        "From `results/bench/20260102-000000/experiment.json` (1970-01-01 00:00 UTC, revision bbbbbbbbbb):", "",
        "| target | ports | frames sent while stopped | kept | lost |", "|---|---|---|---|---|",
        "| bmv2 | as the testbed starts it | 4,000 | 1,312 | 2,688 |"]


def test_the_threads_section_shows_the_newest_bench_that_counted_threads_apart(tmp_path):
    """Its figure goes under docs/figures, made small; one row per program
    and workload with the threads of each step, the busiest egress thread
    of the four and the busiest thread's share of the sum.  Benches that
    counted no threads apart are passed over."""
    from PIL import Image

    from testbed.experiments.bench.instructions import BLAST_WORKLOAD
    from testbed.experiments.report import THREADS, threads_section

    results, docs = tmp_path / "results", tmp_path / "docs"
    assert threads_section(results).startswith("Not run yet: `make bench`")
    forward = {"program": "forward", "workload": "any", "instructions_per_event": 46_000, "p4_revision": "f" * 40,
               "threads_per_event": {"receive": 20_000, "ingress": 13_000, "egress 1": 10_000, "transmit": 3_000}}
    fixed = {"program": "splitter_fixed", "workload": BLAST_WORKLOAD, "instructions_per_event": 120_000,
             "p4_revision": "f" * 40, "threads_per_event": {"receive": 26_000, "ingress": 70_000, "egress 1": 0,
                                                            "egress 3": 17_000, "transmit": 7_000}}
    write_bench(results, "20260101-000000", "a" * 40, {"instructions": [forward, fixed]})
    write_bench(results, "20260102-000000", "b" * 40, {"instructions": [
        {"program": "forward", "workload": "any", "instructions_per_event": 46_000}]})
    assert threads_section(results).startswith("From `results/bench/20260101-000000/experiment.json`")
    Image.new("RGB", (2400, 600), "white").save(results / "bench" / "20260101-000000" / "instructions.png")
    figures = {}
    lines = threads_section(results, figures, docs).splitlines()
    assert lines[:3] == [
        "From `results/bench/20260101-000000/experiment.json` (1970-01-01 00:00 UTC, p4/ of ffffffffff):", "",
        f"![{THREADS}: the bench's figure, instructions.png of the results](figures/{THREADS}.png)"]
    assert list(figures) == [docs / "figures" / f"{THREADS}.png"]
    with Image.open(io.BytesIO(figures[docs / "figures" / f"{THREADS}.png"])) as small:
        assert small.width == 1200
    assert lines[6:8] == [
        "| forward | any | 46,000 | 20,000 | 13,000 | 10,000 | 3,000 | receive, 43% |",
        f"| splitter_fixed | {BLAST_WORKLOAD} | 120,000 | 26,000 | 70,000 | 17,000 | 7,000 | ingress, 58% |"]
    assert len(lines) == 8


@pytest.mark.parametrize("cbsw1_out, verdict", [(50_000.0, "holds"), (30_000.0, "differs")])
def test_s4_fig8_holds_only_where_the_output_is_the_input_times_s4s_factor(tmp_path, cbsw1_out, verdict):
    from testbed.experiments import paper
    from testbed.experiments.claims import compare
    from testbed.rundir import ExperimentDir

    record = {"kind": "rates", "paper": {"s4_fig8": paper.S4_FIG_8}, "ours": {"saturation": [
        {"target": "model", "scenario": "cbtw1", "max_sustained_input": 40_000.0, "output_at_max_sustained": 39_900.0,
         "copies_per_event": 1},
        {"target": "model", "scenario": "cbsw1", "max_sustained_input": 10_000.0,
         "output_at_max_sustained": cbsw1_out, "copies_per_event": 5}]}}
    comparison = compare(ExperimentDir(tmp_path), record)
    assert comparison.verdict == verdict
    cbsw1 = comparison.rows[1]
    assert cbsw1.paper == "×4 (×5 from its Gbps)" and cbsw1.ours.startswith(f"×{cbsw1_out / 10_000:.2f} at 10,000")


def test_a_claim_cites_each_paper_by_its_short_name_and_place():
    from testbed.experiments import paper
    from testbed.experiments.claims import cited

    assert cited(paper.P4SS_ADAPTABILITY["source"]) == "P4SS §2.2 and §4.1, S4 §III (Fig. 3) and §IV-A"
    assert cited(paper.S4_TABLE_V["source"]) == "S4 Table V"


def test_the_instruction_table_says_how_many_times_its_floor_the_splitter_costs(tmp_path):
    """Under the table, from the newest bench that counted both on one
    workload: the splitter's instructions per event over its floor's, and
    forwarding's share of the floor; a workload the floor was not counted on
    (time windows) has no line."""
    from testbed.experiments.report import instructions_section, splitter_multiples

    rows = [{"program": "forward", "workload": "any", "instructions_per_event": 46_000},
            {"program": "splitter", "workload": "count tumbling 100/100", "instructions_per_event": 230_000},
            {"program": "splitter", "workload": "time sliding 1000/500", "instructions_per_event": 350_000},
            {"program": "splitter_floor", "workload": "count tumbling 100/100", "instructions_per_event": 57_500}]
    assert splitter_multiples(rows) == ("count tumbling 100/100, the splitter (`splitter`) 4.0× the floor "
                                        "(`splitter_floor`, 57,500); forwarding 80% of the floor")
    # With the build without changes counted too, both builds stand against the floor.
    fixed = {"program": "splitter_fixed", "workload": "count tumbling 100/100", "instructions_per_event": 172_500}
    assert splitter_multiples([*rows, fixed]) == (
        "count tumbling 100/100, the splitter (`splitter`) 4.0× and (`splitter_fixed`) 3.0× the floor "
        "(`splitter_floor`, 57,500); forwarding 80% of the floor")
    assert splitter_multiples(rows[1:]) == ("count tumbling 100/100, the splitter (`splitter`) 4.0× the floor "
                                            "(`splitter_floor`, 57,500)")
    assert splitter_multiples(rows[:3]) is None and splitter_multiples([rows[0], rows[3]]) is None
    folder = tmp_path / "results" / "bench" / "20260101-000000"
    folder.mkdir(parents=True)
    (folder / "experiment.json").write_text(json.dumps({
        "kind": "bench", "experiment": {"name": "bench"}, "git_revision": "a" * 40, "ours": {"instructions": rows}}))
    last = instructions_section(tmp_path / "results").splitlines()[-1]
    assert last == (f"In `results/bench/20260101-000000`, the splitter's instructions per event against its "
                    f"floor's on the same events: {splitter_multiples(rows)}.")


def test_the_instruction_table_says_what_share_of_the_splitters_blast_forwarding_takes(tmp_path):
    """Under the table, from the newest bench that counted both: forwarding's
    instructions per event over the splitter's on p4cep's blast stream (the
    bench's own label for it), and whether issue 45's 50 % lies within."""
    from testbed.experiments.bench.instructions import BLAST_WORKLOAD
    from testbed.experiments.report import BLAST_WORKLOAD as REPORTED
    from testbed.experiments.report import blast_share, instructions_section, with_earlier_columns

    assert REPORTED == BLAST_WORKLOAD
    rows = [{"program": "forward", "workload": "any", "instructions_per_event": 46_000},
            {"program": "splitter", "workload": BLAST_WORKLOAD, "instructions_per_event": 184_000}]
    assert blast_share(rows) == (
        "plain forwarding's instructions per event are 25.0% of the splitter's (`splitter`, 184,000) on "
        "p4cep's blast stream (count tumbling 1/1, one operator): the most the blast's rate can be of "
        "forwarding's, if it follows instructions. Issue 45's target for that blast, 50% of plain forwarding, "
        "is beyond it.")
    # The blast runs on the build without changes: where the bench counted it, that build's share.
    fixed = {"program": "splitter_fixed", "workload": BLAST_WORKLOAD, "instructions_per_event": 115_000}
    assert blast_share([*rows, fixed]).startswith(
        "plain forwarding's instructions per event are 40.0% of the splitter's (`splitter_fixed`, 115,000)")
    assert blast_share(rows[:1]) is None and blast_share(rows[1:]) is None
    lean = [rows[0], {**rows[1], "instructions_per_event": 92_000}]
    assert blast_share(lean).endswith("50% of plain forwarding, is within it.")
    folder = tmp_path / "results" / "bench" / "20260101-000000"
    folder.mkdir(parents=True)
    (folder / "experiment.json").write_text(json.dumps({
        "kind": "bench", "experiment": {"name": "bench"}, "git_revision": "a" * 40, "ours": {"instructions": rows}}))
    section = instructions_section(tmp_path / "results")
    last = section.splitlines()[-1]
    assert last == f"In `results/bench/20260101-000000`, {blast_share(rows)}"
    assert with_earlier_columns(section)("").splitlines()[-1] == last      # the docs keep it


def test_where_threads_were_counted_the_blasts_share_is_also_taken_between_the_busiest_threads():
    """bmv2 handles a frame on one thread per step, at once for different
    frames: a blast whose threads each have a core goes at its busiest
    thread's rate, one whose threads share the cores at the sum's.  Both
    shares are given, issue 45's verdict on each, and the threads that
    handle no frame are never the busiest."""
    from testbed.experiments.bench.instructions import BLAST_WORKLOAD, OTHER_THREADS
    from testbed.experiments.report import OTHER_THREADS as REPORTED
    from testbed.experiments.report import blast_share, busiest_thread

    assert REPORTED == OTHER_THREADS
    forward = {"program": "forward", "workload": "any", "instructions_per_event": 46_000,
               "threads_per_event": {"receive": 20_000, "ingress": 12_000, "egress 1": 0, "egress 3": 10_000,
                                     "transmit": 3_000, OTHER_THREADS: 90_000}}
    fixed = {"program": "splitter_fixed", "workload": BLAST_WORKLOAD, "instructions_per_event": 100_000,
             "threads_per_event": {"receive": 25_000, "ingress": 50_000, "egress 3": 20_000, "transmit": 5_000}}
    assert busiest_thread(forward) == ("receive", 20_000) and busiest_thread(fixed) == ("ingress", 50_000)
    assert busiest_thread({"program": "forward"}) is None
    assert blast_share([forward, fixed]) == (
        "plain forwarding's instructions per event are 46.0% of the splitter's (`splitter_fixed`, 100,000) on "
        "p4cep's blast stream (count tumbling 1/1, one operator), and forwarding's busiest thread (receive, "
        "20,000) is 40.0% of the splitter's (ingress, 50,000). The first bounds a blast whose threads share the "
        "cores, the second one whose threads each have a core; neither counts the kernel's work to pass a frame "
        "between threads. Issue 45's target for that blast, 50% of plain forwarding, is beyond the first and "
        "beyond the second.")
    # each verdict follows its own share: the busiest thread halved meets the one, not the other
    lean = {**fixed, "instructions_per_event": 150_000,
            "threads_per_event": {"receive": 25_000, "ingress": 40_000, "egress 3": 30_000}}
    assert blast_share([forward, lean]).endswith("is beyond the first and within the second.")
    lean["threads_per_event"]["egress 3"] = 80_000
    assert "(egress 3, 80,000)" in blast_share([forward, lean])
    assert blast_share([forward, lean]).endswith("is beyond the first and beyond the second.")
    assert blast_share([forward, {**fixed, "instructions_per_event": 90_000}]).endswith(
        "is within the first and beyond the second.")
    # a bench that counted the threads of one program only: the instructions' share
    assert blast_share([forward, {**fixed, "threads_per_event": {}}]).endswith(
        "if it follows instructions. Issue 45's target for that blast, 50% of plain forwarding, is beyond it.")


def test_the_instruction_table_keeps_the_docs_columns_of_benches_not_here():
    """results/ is not committed: a bench here adds its column beside the
    docs' columns of benches another machine ran, in the order they began;
    a column of a p4/ revision counted here again is this machine's; a line
    under the table of a kind no bench here wrote stays, one it wrote is new."""
    from testbed.experiments.report import with_earlier_columns

    old = "\n".join([
        "| program | workload | `results/bench/20260101-000000`, p4/ of aaaaaaaaaa "
        "| `results/bench/20260102-000000`, p4/ of bbbbbbbbbb |",
        "|---|---|---|---|",
        "| splitter | count tumbling 100/100 | 223,012 | 222,957 |",
        "| cep_floor | p4cep pattern, window of 32 | - | 93,642 |",
        "",
        "In `results/bench/20260102-000000`, forwarding's instructions per event as a share of each CEP "
        "program's: plain forwarding 49.5% of the least CEP stage.", ""])
    new = "\n".join([
        "| program | workload | `results/bench/20260103-000000`, p4/ of bbbbbbbbbb "
        "| `results/bench/20260104-000000`, p4/ of cccccccccc |",
        "|---|---|---|---|",
        "| splitter | count tumbling 100/100 | 222,950 | 225,124 |",
        "| splitter_floor | count tumbling 100/100 | - | 65,858 |",
        "",
        "In `results/bench/20260104-000000`, the splitter's instructions per event against its floor's on "
        "the same events: count tumbling 100/100, 3.4× the floor.", ""])
    assert with_earlier_columns(new)(old).splitlines() == [
        "| program | workload | `results/bench/20260101-000000`, p4/ of aaaaaaaaaa "
        "| `results/bench/20260103-000000`, p4/ of bbbbbbbbbb | `results/bench/20260104-000000`, p4/ of cccccccccc |",
        "|---|---|---|---|---|",
        "| splitter | count tumbling 100/100 | 223,012 | 222,950 | 225,124 |",
        "| splitter_floor | count tumbling 100/100 | - | - | 65,858 |",
        "",
        "In `results/bench/20260102-000000`, forwarding's instructions per event as a share of each CEP "
        "program's: plain forwarding 49.5% of the least CEP stage.",
        "",
        "In `results/bench/20260104-000000`, the splitter's instructions per event against its floor's on "
        "the same events: count tumbling 100/100, 3.4× the floor."]
    # the cep_floor row had a count only in the column a newer bench of its p4/ replaced
    assert with_earlier_columns(new)("").splitlines()[0] == new.splitlines()[0]


def test_the_instruction_table_keeps_its_oldest_column_beside_the_newest():
    """The oldest column is the baseline a change is measured from (issue 45's
    targets are stated against it): once there are more columns than fit, the
    ones between it and the newest go."""
    from testbed.experiments.report import MAX_BENCHES, kept_columns, with_earlier_columns

    def column(day: int) -> str:
        return f"`results/bench/202601{day:02d}-000000`, p4/ of {day:010d}"

    days = range(1, MAX_BENCHES + 1)
    old = "\n".join(["| program | workload | " + " | ".join(column(d) for d in days) + " |",
                     "|---|---|" + "---|" * MAX_BENCHES,
                     "| splitter | count tumbling 100/100 | " + " | ".join(f"{200 - d:,}" for d in days) + " |", ""])
    new = "\n".join(["| program | workload | " + column(20) + " |", "|---|---|---|",
                     "| splitter | count tumbling 100/100 | 100 |", ""])
    table = with_earlier_columns(new)(old).splitlines()
    heads = [cell.strip() for cell in table[0].strip("|").split("|")][2:]
    assert heads == [column(1)] + [column(d) for d in range(3, MAX_BENCHES + 1)] + [column(20)]
    assert table[2] == ("| splitter | count tumbling 100/100 | 199 | "
                        + " | ".join(f"{200 - d:,}" for d in range(3, MAX_BENCHES + 1)) + " | 100 |")
    assert kept_columns(list(range(MAX_BENCHES))) == list(range(MAX_BENCHES))


def test_the_start_rule_section_puts_both_rules_side_by_side_per_stream(tmp_path):
    from testbed.experiments import paper
    from testbed.experiments.claims import NOT_COMPARABLE, compare
    from testbed.rundir import ExperimentDir

    same = {"windows": 124, "load_max_over_mean": 1.0}
    record = {"kind": "startrule", "paper": {"s4_start_rule": paper.S4_START_RULE}, "ours": {"streams": {
        "tbsw1/1": {"events": 1240, "events_to_other_operators": 0, "grid": same, "event": same},
        "flightsdep/1": {"events": 1000, "events_to_other_operators": 790,
                         "grid": {"windows": 2917, "load_max_over_mean": 1.27},
                         "event": {"windows": 2579, "load_max_over_mean": 1.003}}}}}
    comparison = compare(ExperimentDir(tmp_path), record)
    assert comparison.verdict == NOT_COMPARABLE and comparison.claim.startswith("S4 Algorithms 3 and 4")
    by_case = {row.case: row for row in comparison.rows}
    assert by_case["tbsw1/1: windows, grid / event"].relation == "the same windows"
    flights = by_case["flightsdep/1: windows, grid / event"]
    assert flights.ours == "2,917 / 2,579" and flights.relation == "the rules part where time has gaps"
    assert by_case["flightsdep/1: events sent to other operators"].ours == "790 of 1,000 (79%)"
    assert by_case["flightsdep/1: busiest operator over the mean, grid / event"].ours == "1.270 / 1.003"


@pytest.mark.parametrize("ratio, windows, verdict", [
    (1.5, 4, "holds"),        # 4 windows over 3: one instance must take 2, the mean is 4/3
    (1.125, 8, "holds"),      # 8 over 3: 3 against 8/3
    (1.5, 300, "differs"),    # enough windows to be even: the imbalance is the splitter's
    (1.5, None, "differs"),   # a run without a reference: no bound to excuse it
    (1.05, None, "holds"),
])
def test_load_is_held_to_the_evenest_split_its_whole_windows_allow(tmp_path, monkeypatch, ratio, windows, verdict):
    from testbed.experiments import claims
    from testbed.rundir import ExperimentDir

    monkeypatch.setattr(claims, "load_balance", lambda rundir: {"cm": ("time, Δ=2000 τ=2000", ratio, 3, windows)})
    record = {"ours": {"runs": {"cm": {"ok": True, "run_dir": "runs/cm"}}},
              "paper": {"s4_fig6": {"input_gbps": 8.42, "packet_bytes": 128}}}
    assert claims.scenarios(ExperimentDir(tmp_path), record).verdict == verdict


def test_whole_window_bound():
    from testbed.experiments.claims import whole_window_bound

    assert whole_window_bound(4, 3) == pytest.approx(1.5)
    assert whole_window_bound(6, 3) == pytest.approx(1.0)
    assert whole_window_bound(1000, 1024) == pytest.approx(1.024)
    assert whole_window_bound(None, 3) == 1.0


def test_e2elatency_sets_the_switchs_time_beside_what_the_pipeline_sustained(tmp_path):
    from testbed.experiments import claims
    from testbed.rundir import ExperimentDir

    record = {"kind": "e2elatency",
              "paper": {"s4_table5": {"source": "S4, Table V", "avg": {"cbtw": 1.76, "tbsw": 1.87},
                                      "min": {"cbtw": 1.72, "tbsw": 1.83}, "max": {"cbtw": 1.8, "tbsw": 1.93}}},
              "ours": {"capacity_events_per_s": {"bmv2": 18000.0},
                       "sustainable": {"bmv2 cbtw1": {"events_per_s": 1800, "share_of_capacity": 0.1,
                                                      "p99_s": 0.52, "first_behind": 3600},
                                       "bmv2 tbsw1": {"events_per_s": None, "share_of_capacity": None,
                                                      "p99_s": None, "first_behind": 900}}}}
    c = claims.compare(ExperimentDir(tmp_path), record)
    assert c.verdict == "not comparable" and "1.72–1.93 µs" in c.claim
    by_case = {r.case: r for r in c.rows}
    assert by_case["cbtw1 (bmv2)"].paper == "1.76 µs in the switch alone"
    assert by_case["cbtw1 (bmv2)"].ours.startswith("kept up to 1,800 events/s (10% of the switch's 18,000)")
    assert "0.52 s (p99)" in by_case["cbtw1 (bmv2)"].ours
    assert by_case["tbsw1 (bmv2)"].ours == "fell behind at the first rate tried, 900 events/s"


def test_s4scale_sets_its_most_streams_beside_s4s_stream_capacities(tmp_path):
    """Issue 43: the streams sweep's largest passing point, and the largest with
    Spark's windows checked too, beside S4 Fig. 7's stream capacities; a failed
    point never counts."""
    from testbed.experiments import paper
    from testbed.experiments.claims import NOT_COMPARABLE, compare
    from testbed.rundir import ExperimentDir

    def point(streams, spark, passes):
        return {"target": "bmv2", "sweep": "streams", "N": 64, "streams": streams, "events": streams * 64,
                "spark": spark, "check_passes": passes}

    record = {"kind": "scale", "paper": {"s4_fig7": paper.S4_FIG_7}, "ours": {
        "largest_n_passed": {"bmv2": 1024},
        "points": [point(16, True, True), point(4096, True, True), point(16384, True, False),
                   point(65536, False, True)]}}
    comparison = compare(ExperimentDir(tmp_path), record)
    assert comparison.verdict == NOT_COMPARABLE and "286,000 concurrent" in comparison.claim
    streams = {row.case: row for row in comparison.rows}["concurrent streams on one switch (bmv2)"]
    assert streams.ours == "65,536 live, every event checked (4,096 with Spark, every window too)"
    assert streams.relation == "22.9% of S4's count-tumbling, 100.8% of S4's time-based"
    record["ours"]["points"][-1]["check_passes"] = False
    streams = {row.case: row for row in compare(ExperimentDir(tmp_path), record).rows}[
        "concurrent streams on one switch (bmv2)"]
    assert streams.ours == "4,096 live, every event checked"
