"""``testbed report``: the docs' numbers, written from the results files.

No number in ``docs/evaluation.md`` is typed by hand.  Between marker
comments (``<!-- BEGIN generated: NAME -->`` ... ``<!-- END generated: NAME -->``)
this module writes, for each paper experiment, the paper's numbers and ours
as the newest ``experiment.json`` holds them, with the directory and time
they come from.  The run record's schema in ``docs/results.md`` is
generated the same way, from the models (``testbed.rundir.schema``), the
stability table of ``make stress`` from ``results/stress/*/stability.json``,
and bmv2's instructions per event and what a stopped switch's input keeps
(``docs/p4.md``) from the benches in ``results/bench/``.  ``results/`` is not committed, so a section this
machine has no results for keeps what an earlier machine's results wrote,
and says "Not run yet" only where the docs have nothing.  Text outside the
markers is left alone, and ``--check`` says whether the docs are what the
results here give.
"""
from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Union

from testbed import ROOT
from testbed.experiments import claims
from testbed.experiments.cep import SPLITTER_ALONE_TARGET
from testbed.experiments.claims import Comparison
from testbed.rundir import ExperimentDir, RunDirError
from testbed.rundir.schema import markdown as record_schema

#: Leaves shown per experiment and side; the rest are in the results' raw/ and experiment.json.
MAX_ROWS = 40
#: A list longer than this is summarised by its length, not spelt out.
MAX_LIST = 6
MARKER = re.compile(r"(<!-- BEGIN generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- END generated: (?P=name) -->)",
                    re.S)
RECORD_SCHEMA = "run-record"
STRESS = "stress"
INSTRUCTIONS = "bench-instructions"
STALLED = "bench-stalled-input"
THREADS = "bench-threads"
#: The bench's figure of instructions per event by thread (bench.figures.draw_instructions).
THREADS_FIGURE = "instructions"
#: Programs shown side by side in the instructions table: the oldest, which
#: issue 45 states its targets against, and the newest ones (``kept_columns``).
MAX_BENCHES = 6
#: Where the sections' figures go, under the docs folder (and how the docs link them).
FIGURES = "figures"
#: A figure in the docs: wide enough for GitHub's page, in a palette, so each stays well under 150 KB.
FIGURE_WIDTH = 1200
FIGURE_COLOURS = 256
#: What ``testbed report`` writes beside each experiment.json: its every number as a table.
NUMBERS = "numbers.md"
#: How a section without results begins.
NOT_RUN = "Not run yet"


def newest_result(name: str, results: Path) -> Optional[ExperimentDir]:
    """``results/figures/<name>/`` as ``make figures`` writes it, else the newest
    ``results/<name>/<id>/`` whose experiment ended without an error.

    An experiment still running, killed or ended by an error has an
    ``experiment.json`` too, without our numbers: the docs would lose the
    last good ones to it.  Only when no result has ended well is the newest
    taken all the same, so that what is wrong with it is said by name."""
    figures = ExperimentDir(results / "figures" / name)
    if figures.is_experiment():
        return figures
    found = [ExperimentDir(p) for p in sorted((results / name).glob("*")) if ExperimentDir(p).is_experiment()]
    ended = [expdir for expdir in found if _ended_well(expdir)]
    return (ended or found or [None])[-1]


def _ended_well(expdir: ExperimentDir) -> bool:
    try:
        record = expdir.read_record()
    except RunDirError:
        return False
    return "ended" in record and "error" not in record


def leaves(value: Any, prefix: str = "", max_list: Optional[int] = MAX_LIST) -> Iterator[tuple[str, str]]:
    """``(dotted key, text)`` for every scalar under ``value``; lists longer than
    ``max_list`` by their length (``None``: every list spelt out)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from leaves(inner, f"{prefix}.{key}" if prefix else str(key), max_list)
    elif isinstance(value, list) and ((max_list is not None and len(value) > max_list)
                                      or any(isinstance(v, (dict, list)) for v in value)):
        if max_list is None or len(value) <= max_list:
            for i, inner in enumerate(value):
                yield from leaves(inner, f"{prefix}[{i}]", max_list)
        else:
            yield prefix, f"{len(value)} entries"
    elif isinstance(value, float):
        yield prefix, f"{value:.4g}"
    else:
        yield prefix, json.dumps(value) if isinstance(value, list) else str(value)


def shown(path: Path, root: Path) -> Path:
    """``path`` relative to the checkout ``root`` when it lies inside it."""
    return path.relative_to(root) if path.is_relative_to(root) else path


def table(pairs: list[tuple[str, str]], limit: Optional[int] = MAX_ROWS) -> list[str]:
    rows = ["| key | value |", "|---|---|"]
    rows += [f"| `{k}` | {v.replace('|', '/')} |" for k, v in pairs[:limit]]
    if limit is not None and len(pairs) > limit:
        rows.append(f"| … | {len(pairs) - limit} more in experiment.json |")
    return rows


def when(record: dict[str, Any]) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record.get("started", 0)))


def provenance(expdir: ExperimentDir, record: dict[str, Any], root: Path) -> str:
    """Where the section's numbers come from, and whether the experiment passed its checks."""
    verdict = "passed its checks" if record.get("ok") else "did NOT pass its checks"
    return (f"From `{shown(expdir.root, root)}/experiment.json` ({when(record)}, revision "
            f"{str(record.get('git_revision', '?'))[:10]}, {'quick size' if record.get('quick') else 'full size'}): "
            f"{verdict}.")


def compared(expdir: ExperimentDir, record: dict[str, Any]) -> tuple[Comparison, Optional[str]]:
    """The record's comparison with the paper, and why the plain one stands in for it if it does."""
    try:
        return claims.compare(expdir, record), None
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError) as err:
        # A record of an older or another shape: the section still says what the paper claims.
        return claims.finding_only(expdir, record), f"this record's shape is not the one the report reads ({err!r})"


def figure_source(expdir: ExperimentDir, record: dict[str, Any], comparison: Comparison) -> Optional[Path]:
    """The results' figure the section shows: the comparison's choice, else the record's first."""
    names = [f for f in record.get("figures") or [] if isinstance(f, str)]
    chosen = comparison.figure if comparison.figure in names else (names[0] if names else None)
    if chosen is None:
        return None
    path = expdir.root / Path(chosen).name
    return path if path.is_file() else None


def small_png(path: Path) -> bytes:
    """``path`` made small enough for the repository: at most ``FIGURE_WIDTH`` pixels wide
    and a palette of ``FIGURE_COLOURS``.  Plots have few colours, so they stay sharp; the
    octree keeps each line's colour, where median cut merged blue into green and orange into red."""
    from PIL import Image

    with Image.open(path) as image:
        image = image.convert("RGB")
        if image.width > FIGURE_WIDTH:
            image = image.resize((FIGURE_WIDTH, round(image.height * FIGURE_WIDTH / image.width)),
                                 Image.Resampling.LANCZOS)
        out = io.BytesIO()
        image.quantize(FIGURE_COLOURS, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(
            out, format="PNG", optimize=True)
        return out.getvalue()


def section(name: str, expdir: Optional[ExperimentDir], root: Path,
            figures: Optional[dict[Path, bytes]] = None, docs: Optional[Path] = None) -> str:
    """The generated text of one experiment: the paper's claim, our figure, the
    paper's cases beside ours, the verdict, then where the numbers come from.
    The figure to copy under ``docs/figures/`` goes into ``figures``."""
    if expdir is None:
        return f"{NOT_RUN}: `make experiment NAME={name}` (or `make figures`) writes its results.\n"
    record = expdir.read_record()
    comparison, fallback = compared(expdir, record)
    out = [f"**The paper.** {comparison.claim}", ""]
    source = figure_source(expdir, record, comparison)
    if source is not None:
        target = (docs if docs is not None else root / "docs") / FIGURES / f"{name}.png"
        if figures is not None:
            figures[target] = small_png(source)
        out += [f"![{name}: our figure, {source.name} of the results]({FIGURES}/{name}.png)", ""]
    if comparison.rows:
        out += comparison.markdown() + [""]
    out += [f"**Verdict: {comparison.verdict}**: {comparison.why}.", ""]
    if comparison.detail:
        out += comparison.detail + [""]
    out.append(provenance(expdir, record, root) + f" Every number is in its `experiment.json`; `testbed report` "
               f"also lists them in `{NUMBERS}` beside it.")
    if fallback:
        out.append(f"The table is missing: {fallback}.")
    for what, why in (record.get("skipped") or {}).items():
        out.append(f"- skipped {what}: {why}")
    return "\n".join(out).rstrip() + "\n"


def numbers(record: dict[str, Any]) -> str:
    """Every number of a record, as the key/value table the docs no longer carry."""
    out = [f"# {record.get('experiment', {}).get('name', 'experiment')}: every number of experiment.json", ""]
    for key, paper in (record.get("paper") or {}).items():
        paper = dict(paper) if isinstance(paper, dict) else {"value": paper}
        out += [f"## The paper: {paper.pop('source', key)}", ""] + table(list(leaves(paper, max_list=None)), None)
        out.append("")
    out += ["## Ours", ""] + table(list(leaves(record.get("ours") or {}, max_list=None)), None)
    return "\n".join(out) + "\n"


def legacy(name: str) -> Callable[[str], str]:
    """A section this machine has no results for, as the docs hold it: kept,
    unless it is in the layout of key/value dumps, whose numbers live in the
    results' experiment.json; then only where they came from stays."""
    def kept(old: str) -> str:
        if "| key | value |" not in old:
            return old
        first = old.strip().splitlines()[0]
        came = first if first.startswith("From `") else "From results that are not on this machine."
        return (f"{came}\n\nThose results were written before each section had the paper's claim, our figure, "
                f"the paper's cases beside ours and a verdict, and are not on this machine: "
                f"`make experiment NAME={name}` and then `testbed report` write them here. Their numbers are in "
                f"that folder's `experiment.json`.\n")
    return kept


def stress_section(results: Path) -> str:
    """One row per ``make stress`` run in ``results/stress/``, oldest first:
    what it stressed, how many suite runs passed, and each scenario or
    experiment verdict that did not pass every repetition."""
    folders = sorted(p for p in (results / "stress").glob("*") if (p / "stability.json").is_file())
    if not folders:
        return f"{NOT_RUN}: `make stress` writes `results/stress/<id>/stability.md`.\n"
    out = ["| results | revision | repeated | on | suite runs passed | tests that failed | verdicts "
           "passed every time | verdicts that did not |", "|---|---|---|---|---|---|---|---|"]
    for folder in folders:
        try:
            data = json.loads((folder / "stability.json").read_text())
        except (OSError, ValueError):
            out.append(f"| `{folder.name}` | unreadable stability.json | | | | | | |")
            continue
        out.append(f"| `{folder.name}` | " + " | ".join(stress_row(data)) + " |")
    return "\n".join(out) + "\n"


def stress_row(data: dict[str, Any]) -> list[str]:
    """The cells after the folder's name of one stress run's row."""
    setup, suite = data.get("setup") or {}, data.get("suite") or []
    repeated = {"scenario": data.get("scenarios") or {}, "experiment": data.get("experiments") or {}}
    failed = sorted({test.split("::")[-1] for run in suite for test in run.get("failed") or []})
    verdicts = [(name, row) for group in repeated.values() for name, stability in group.items()
                for row in stability.get("verdicts") or []]
    shaky = [f"{name} `{row.get('verdict')}` {row.get('passed')} of {row.get('of')}"
             for name, row in verdicts if row.get("passed") != row.get("of")]
    errors = sum(1 for group in repeated.values() for stability in group.values()
                 for error in stability.get("errors") or [] if error)
    if errors:
        shaky.append(f"{errors} repetitions ended in an error")
    what = [f"{len(group)} {kind}{'s' if len(group) > 1 else ''}"
            + (" (quick)" if kind == "experiment" and setup.get("quick") else "")
            + f" × {max(len(s.get('seconds') or []) for s in group.values())}"
            for kind, group in repeated.items() if group]
    on = setup.get("target") or "each one's own target"
    if "spark" in setup:
        on += f", Spark {'on' if setup['spark'] else 'off'}"
    return [str(setup["revision"])[:10] if setup.get("revision") else "not recorded", ", ".join(what) or "-",
            on if what else "-",
            f"{sum(1 for r in suite if r.get('ok'))} of {len(suite)}" if suite else "-", ", ".join(failed) or "-",
            f"{sum(1 for _name, row in verdicts if row.get('passed') == row.get('of'))} of {len(verdicts)}"
            if verdicts else "-", "; ".join(shaky) or "-"]


def instructions_section(results: Path) -> str:
    """bmv2's instructions per event (``make bench``, its ``instructions`` part):
    one row per program and workload, one column per program that benches
    counted (the newest bench of each), oldest first, so that a change of the
    program shows as a change along a row, and benches of one program repeated
    do not push the programs before it out of the table."""
    benches = benches_with("instructions", results)
    if not benches:
        return f"{NOT_RUN}: `make bench` counts them (its `instructions` part; bmv2 and valgrind needed).\n"
    newest_of = {program_of(record, rows): (expdir, record, rows) for expdir, record, rows in benches}
    benches = kept_columns(list(newest_of.values()))
    root = results.parent
    heads = [f"`{shown(e.root, root)}`, "
             f"p4/ of {program_of(r, rows)}" for e, r, rows in benches]
    cases: dict[tuple[str, str], dict[int, Any]] = {}
    for i, (_expdir, _record, rows) in enumerate(benches):
        for row in rows:
            cases.setdefault((row.get("program"), row.get("workload")), {})[i] = row.get("instructions_per_event")
    out = ["| program | workload | " + " | ".join(heads) + " |", "|---|---|" + "---|" * len(benches)]
    for (program, workload), counts in cases.items():
        cells = [f"{counts[i]:,}" if isinstance(counts.get(i), int) else "-" for i in range(len(benches))]
        out.append(f"| {program} | {workload} | " + " | ".join(cells) + " |")
    floors = [(e, rows) for e, _record, rows in benches if floor_shares(rows)]
    if floors:
        expdir, rows = floors[-1]
        where = shown(expdir.root, root)
        out += ["", f"In `{where}`, forwarding's instructions per event as a share of each CEP program's "
                f"(the most its throughput can be of forwarding's, if throughput follows instructions): "
                f"{floor_shares(rows)}.{floor_verdict(rows)}"]
    splitters = [(e, rows) for e, _record, rows in benches if splitter_multiples(rows)]
    if splitters:
        expdir, rows = splitters[-1]
        out += ["", f"In `{shown(expdir.root, root)}`, the splitter's instructions per event against its "
                f"floor's on the same events: {splitter_multiples(rows)}."]
    blasts = [(e, rows) for e, _record, rows in benches if blast_share(rows)]
    if blasts:
        expdir, rows = blasts[-1]
        out += ["", f"In `{shown(expdir.root, root)}`, {blast_share(rows)}"]
    return "\n".join(out) + "\n"


def kept_columns(columns: list) -> list:
    """The instruction table's columns, oldest first: the oldest, the baseline a
    change is measured from, and the newest ``MAX_BENCHES`` - 1."""
    if len(columns) <= MAX_BENCHES:
        return columns
    return columns[:1] + columns[len(columns) - MAX_BENCHES + 1:]


def benches_with(part: str, results: Path) -> list[tuple[ExperimentDir, dict[str, Any], list[dict[str, Any]]]]:
    """``(bench, its record, the part's rows)`` of every bench in ``results/bench/``
    that ran ``part``, oldest first; unreadable records are passed over."""
    found = []
    for path in sorted((results / "bench").glob("*")):
        expdir = ExperimentDir(path)
        if not expdir.is_experiment():
            continue
        try:
            record = expdir.read_record()
        except (OSError, ValueError):
            continue
        rows = (record.get("ours") or {}).get(part)
        if rows:
            found.append((expdir, record, rows))
    return found


def threads_section(results: Path, figures: Optional[dict[Path, bytes]] = None,
                    docs: Optional[Path] = None) -> str:
    """What each of bmv2's threads spent per event, from the newest bench
    that counted them apart: its figure (copied under ``docs/figures/``
    into ``figures``) and a table of the threads per program and workload.
    The blast's share between the busiest threads is the instruction
    table's last line (``blast_share``)."""
    benches = [(expdir, record, rows) for expdir, record, rows in benches_with("instructions", results)
               if any(busiest_thread(row) for row in rows)]
    if not benches:
        return (f"{NOT_RUN}: `make bench` counts them thread by thread (its `instructions` part; bmv2 and "
                "valgrind needed).\n")
    expdir, record, rows = benches[-1]
    root = results.parent
    where = shown(expdir.root, root)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record.get("started", 0)))
    out = [f"From `{where}/experiment.json` ({when}, p4/ of {program_of(record, rows)}):", ""]
    source = expdir.figure(THREADS_FIGURE)
    if source.is_file():
        target = (docs if docs is not None else root / "docs") / FIGURES / f"{THREADS}.png"
        if figures is not None:
            figures[target] = small_png(source)
        out += [f"![{THREADS}: the bench's figure, {source.name} of the results]({FIGURES}/{THREADS}.png)", ""]
    out += ["| program | workload | instructions per event | receive | ingress | busiest egress | transmit "
            "| busiest thread's share |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        busiest = busiest_thread(row)
        if busiest is None:
            continue
        threads = row["threads_per_event"]
        egress = max((cost for name, cost in threads.items() if name.startswith("egress")), default=0)
        total = row.get("instructions_per_event") or 0
        share = f"{busiest[0]}, {busiest[1] / total:.0%}" if total else busiest[0]
        out.append(f"| {row.get('program')} | {row.get('workload')} | {total:,} | {threads.get('receive', 0):,} | "
                   f"{threads.get('ingress', 0):,} | {egress:,} | {threads.get('transmit', 0):,} | {share} |")
    return "\n".join(out) + "\n"


def stalled_section(results: Path) -> str:
    """What a stopped switch's input kept of a burst (``make bench``, its
    ``stalled_input`` part), from the newest bench that measured it."""
    benches = benches_with("stalled_input", results)
    if not benches:
        return f"{NOT_RUN}: `make bench` measures it (its `stalled_input` part; root needed).\n"
    expdir, record, rows = benches[-1]
    root = results.parent
    where = shown(expdir.root, root)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record.get("started", 0)))
    out = [f"From `{where}/experiment.json` ({when}, revision {str(record.get('git_revision', '?'))[:10]}):", "",
           "| target | ports | frames sent while stopped | kept | lost |", "|---|---|---|---|---|"]
    for row in rows:
        out.append(f"| {row.get('target')} | {row.get('ports')} | {row.get('burst', '-'):,} | "
                   f"{row.get('kept', '-'):,} | {row.get('lost', '-'):,} |")
    return "\n".join(out) + "\n"


#: The rows ``floor_shares`` reads: (program, workload) of ``make bench``'s instructions part.
FORWARDING = {"plain forwarding": ("forward", "any"), "forwarding that reads the event": ("forward_events", "any")}
LEAST_CEP = "cep_floor"
CEP_ROWS = {"the least CEP stage (`cep_floor`)": LEAST_CEP, "the CEP build (`splitter_cep`)": "splitter_cep"}


#: The least count-window splitter, counted on the splitter's count workloads
#: (docs/p4.md, "The splitter's floor"), and the builds it is the floor of:
#: the plain one and the one without changes mid-stream, which a topology that
#: changes no stream runs (docs/p4.md, "A build without changes").
LEAST_SPLITTER, SPLITTER, FIXED_SPLITTER = "splitter_floor", "splitter", "splitter_fixed"


def counted_builds(per_event: dict[tuple[Any, Any], Any], workload: str,
                   builds: tuple[str, ...]) -> list[tuple[str, int]]:
    """``(build, instructions per event)`` of each of ``builds``, in that order,
    that the bench counted on ``workload``."""
    counts = [(build, per_event.get((build, workload))) for build in builds]
    return [(build, count) for build, count in counts if isinstance(count, int)]


def splitter_multiples(rows: list[dict[str, Any]]) -> Optional[str]:
    """How many times its floor's instructions per event the shipped splitter
    spends, per workload both were counted on, and what forwarding costs
    beside them.  None without a pair."""
    per_event = per_event_of(rows)
    forward = per_event.get(FORWARDING["plain forwarding"])
    parts = []
    for (program, workload), floor in per_event.items():
        builds = counted_builds(per_event, workload, (SPLITTER, FIXED_SPLITTER))
        if program != LEAST_SPLITTER or not (isinstance(floor, int) and builds):
            continue
        against = f"; forwarding {forward / floor:.0%} of the floor" if isinstance(forward, int) else ""
        multiples = " and ".join(f"(`{build}`) {count / floor:.1f}×" for build, count in builds)
        parts.append(f"{workload}, the splitter {multiples} the floor "
                     f"(`{LEAST_SPLITTER}`, {floor:,}){against}")
    return "; ".join(parts) or None


#: The splitter on p4cep's blast stream (bench.instructions.BLAST_WORKLOAD),
#: and issue 45's target for that blast: the splitter alone at half of plain
#: forwarding's events per second (cep.SPLITTER_ALONE_TARGET).
BLAST_WORKLOAD, BLAST_TARGET_SHARE = "count tumbling 1/1, one operator", SPLITTER_ALONE_TARGET
#: bench.instructions.OTHER_THREADS: the switch's threads that handle no frame.
OTHER_THREADS = "other"


def blast_share(rows: list[dict[str, Any]]) -> Optional[str]:
    """Plain forwarding's instructions per event as a share of the splitter's
    on p4cep's blast stream, and whether issue 45's blast target lies within
    it, as a sentence; None when the bench did not count both.  The splitter
    is the build the blast runs on, without changes (its topology changes no
    stream), where the bench counted it; else the plain build.  Where the
    bench counted bmv2's threads apart, the share between the two programs'
    busiest threads (``busiest_thread``) too, with the target held to each:
    the sum bounds a blast whose threads share the cores, the busiest thread
    one whose threads each have a core (docs/p4.md, "Which thread bounds a
    blast")."""
    per_event = per_event_of(rows)
    forward = per_event.get(FORWARDING["plain forwarding"])
    counted = counted_builds(per_event, BLAST_WORKLOAD, (FIXED_SPLITTER, SPLITTER))
    if not (isinstance(forward, int) and counted):
        return None
    build, splitter = counted[0]
    share = forward / splitter
    out = (f"plain forwarding's instructions per event are {share:.1%} of the splitter's "
           f"(`{build}`, {splitter:,}) on p4cep's blast stream ({BLAST_WORKLOAD})")
    threads = {(row.get("program"), row.get("workload")): busiest_thread(row) for row in rows}
    forward_thread = threads.get(FORWARDING["plain forwarding"])
    splitter_thread = threads.get((build, BLAST_WORKLOAD))
    target = f"Issue 45's target for that blast, {BLAST_TARGET_SHARE:.0%} of plain forwarding,"
    if not (forward_thread and splitter_thread):
        return (f"{out}: the most the blast's rate can be of forwarding's, if it follows instructions. "
                f"{target} is {within(share)} it.")
    thread_share = forward_thread[1] / splitter_thread[1]
    return (f"{out}, and forwarding's busiest thread ({forward_thread[0]}, {forward_thread[1]:,}) is "
            f"{thread_share:.1%} of the splitter's ({splitter_thread[0]}, {splitter_thread[1]:,}). The first "
            f"bounds a blast whose threads share the cores, the second one whose threads each have a core; "
            f"neither counts the kernel's work to pass a frame between threads. {target} is {within(share)} "
            f"the first and {within(thread_share)} the second.")


def within(share: float) -> str:
    """Whether issue 45's blast target lies within a share of forwarding."""
    return "within" if share >= BLAST_TARGET_SHARE else "beyond"


def busiest_thread(row: dict[str, Any]) -> Optional[tuple[str, int]]:
    """The thread of bmv2 that spent the most per event on a bench row, and
    how much, from its ``threads_per_event``; None in a bench that did not
    count threads apart.  Threads that handle no frame are left out."""
    threads = {thread: cost for thread, cost in (row.get("threads_per_event") or {}).items()
               if thread != OTHER_THREADS and isinstance(cost, (int, float))}
    if not threads:
        return None
    thread = max(threads, key=lambda name: threads[name])
    return thread, round(threads[thread])


#: Issue 22's bmv2 throughput target: the CEP build at n = 32 against plain forwarding.
CEP_TARGET_SHARE = 0.8


def floor_verdict(rows: list[dict[str, Any]]) -> str:
    """Whether issue 22's target is within the least CEP stage's share, as a
    sentence ("" when the bench did not count both programs)."""
    per_event = per_event_of(rows)
    forward = per_event.get(FORWARDING["plain forwarding"])
    floors = [count for (program, _workload), count in per_event.items() if program == LEAST_CEP]
    if not (isinstance(forward, int) and floors and isinstance(floors[0], int)):
        return ""
    where = "within" if forward / floors[0] >= CEP_TARGET_SHARE else "beyond"
    return (f" Issue 22's bmv2 target, throughput at {CEP_TARGET_SHARE:.0%} of plain forwarding, is {where} "
            "the least CEP stage's share.")


def per_event_of(rows: list[dict[str, Any]]) -> dict[tuple[Any, Any], Any]:
    """Instructions per event by (program, workload)."""
    return {(row.get("program"), row.get("workload")): row.get("instructions_per_event") for row in rows}


def floor_shares(rows: list[dict[str, Any]]) -> Optional[str]:
    """What share of a CEP program's instructions per event forwarding takes,
    for each forwarding baseline and CEP program a bench counted on P4CEP's
    pattern: the most that program's throughput can be of forwarding's, if
    throughput follows instructions.  None without a pair to compare."""
    per_event = per_event_of(rows)
    cep_workloads = {row.get("workload") for row in rows if row.get("program") in CEP_ROWS.values()}
    parts = []
    for name, key in FORWARDING.items():
        base = per_event.get(key)
        shares = [f"{base / per_event[program, workload]:.1%} of {label}"
                  for label, program in CEP_ROWS.items() for workload in sorted(cep_workloads, key=str)
                  if isinstance(base, int) and isinstance(per_event.get((program, workload)), int)]
        if shares:
            parts.append(f"{name} " + " and ".join(shares))
    return "; ".join(parts) or None


def program_of(record: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """Which program a bench counted: the newest commit that changed p4/ (its
    rows say), else the checkout's revision."""
    revisions = {row.get("p4_revision") for row in rows if row.get("p4_revision")}
    revision = revisions.pop() if len(revisions) == 1 else record.get("git_revision", "?")
    return str(revision)[:10] + (" (dirty)" if str(revision).endswith("-dirty") else "")


#: A section's new text, or how to make it from the text the docs have.
Generated = Union[str, Callable[[str], str]]


def rewrite(text: str, generated: dict[str, Generated], if_blank: Optional[dict[str, str]] = None) -> str:
    """``text`` with the body between each named marker pair replaced; other
    text untouched.  A name only in ``if_blank`` replaces a body that is blank."""
    if_blank = if_blank or {}

    def body(match: re.Match) -> str:
        name, old = match.group("name"), match.group("body")
        new = generated.get(name, if_blank.get(name, old) if not old.strip() else old)
        return f"{match.group(1)}{new(old) if callable(new) else new}{match.group(4)}"
    return MARKER.sub(body, text)


def with_earlier_rows(table: str) -> Callable[[str], str]:
    """``table`` (a header, a rule and rows named by their first cell) with the
    rows of the docs' table that it has no row of the same name for, all in
    the order of their names.  The stress runs' folders are named by when they
    began, and ``results/`` is not committed: another machine's runs stay in
    the table beside this one's."""
    def name(row: str) -> str:
        return row.split("|")[1].strip()

    def merged(old: str) -> str:
        head, rows = table.splitlines()[:2], table.splitlines()[2:]
        have = {name(row) for row in rows}
        earlier = [row for row in old.splitlines()[2:] if row.startswith("| `") and name(row) not in have]
        return "\n".join(head + sorted(rows + earlier, key=name)) + "\n"
    return merged


#: What each line under the instruction table says, by words it alone has:
#: the docs keep an earlier bench's line of a kind the benches here lack.
UNDER_TABLE = ("forwarding's instructions per event as a share", "the splitter's instructions per event against",
               "on p4cep's blast stream")


def with_earlier_columns(section: str) -> Callable[[str], str]:
    """``section`` (``instructions_section``'s table and the lines under it)
    with the columns of the docs' table that no bench here stands for, in
    the order of their folders' names (when the benches began), the oldest
    and the newest kept (``kept_columns``).  ``results/`` is not committed, so the benches of
    another machine, or of a p4/ this machine no longer has results of,
    stay for comparison; a column of a p4/ revision counted here again is
    replaced.  Likewise a line under the table of a kind the benches here
    did not write."""
    def revision(head: str) -> str:
        return head.rsplit("p4/ of ", 1)[-1]

    def began(head: str) -> str:
        found = re.search(r"\d{8}-\d{6}", head)
        return found.group(0) if found else head

    def parse(text: str) -> tuple[list[str], dict[tuple[str, str], dict[str, str]], list[str]]:
        lines = text.strip().splitlines()
        table = [line for line in lines if line.startswith("|")]
        under = [line for line in lines if line.strip() and not line.startswith("|")]
        if len(table) < 2:
            return [], {}, under
        heads = [cell.strip() for cell in table[0].strip().strip("|").split("|")][2:]
        cells = {}
        for row in table[2:]:
            parts = [cell.strip() for cell in row.strip().strip("|").split("|")]
            cells[parts[0], parts[1]] = dict(zip(heads, parts[2:]))
        return heads, cells, under

    def merged(old: str) -> str:
        new_heads, new_cells, new_under = parse(section)
        old_heads, old_cells, old_under = parse(old)
        revisions = {revision(head) for head in new_heads}
        earlier = [head for head in old_heads if head not in new_heads and revision(head) not in revisions]
        heads = kept_columns(sorted(earlier + new_heads, key=began))
        cases = list(old_cells) + [case for case in new_cells if case not in old_cells]
        out = ["| program | workload | " + " | ".join(heads) + " |", "|---|---|" + "---|" * len(heads)]
        for case in cases:
            row = [(new_cells if head in new_heads else old_cells).get(case, {}).get(head, "-") for head in heads]
            if any(cell != "-" for cell in row):
                out.append(f"| {case[0]} | {case[1]} | " + " | ".join(row) + " |")
        for kind in UNDER_TABLE:
            line = next((line for line in new_under if kind in line),
                        next((line for line in old_under if kind in line), None))
            if line is not None:
                out += ["", line]
        return "\n".join(out) + "\n"
    return merged


def generated_docs(docs: Path, results: Path, names: list[str], figures: Optional[dict[Path, bytes]] = None,
                   records: Optional[dict[Path, str]] = None) -> dict[Path, str]:
    """Each generated document's new text (only the documents that have markers);
    the figures its sections show go into ``figures`` (path under ``docs`` ->
    PNG), and each experiment's every number into ``records`` (its ``numbers.md``)."""
    root = results.parent
    # results/ is not committed: what this machine has no results for keeps
    # the text an earlier machine's results wrote (each names its folder,
    # date and revision), and says "Not run yet" only where there is none.
    sections: dict[str, Generated] = {RECORD_SCHEMA: record_schema() + "\n"}
    if_blank: dict[str, str] = {}
    # The tables below are no experiment's: naming one (--only stress)
    # rewrites only them.
    for name in names:
        if name not in (RECORD_SCHEMA, STRESS, INSTRUCTIONS, STALLED, THREADS):
            expdir = newest_result(name, results)
            if expdir is None:
                sections[name] = without_results(name)
                continue
            sections[name] = section(name, expdir, root, figures, docs)
            if records is not None:
                records[expdir.root / NUMBERS] = numbers(expdir.read_record())
    stress, instructions = stress_section(results), instructions_section(results)
    if stress.startswith(NOT_RUN):
        if_blank[STRESS] = stress
    else:
        sections[STRESS] = with_earlier_rows(stress)
    if instructions.startswith(NOT_RUN):
        if_blank[INSTRUCTIONS] = instructions
    else:
        sections[INSTRUCTIONS] = with_earlier_columns(instructions)
    stalled = stalled_section(results)
    (if_blank if stalled.startswith(NOT_RUN) else sections)[STALLED] = stalled
    threads = threads_section(results, figures, docs)
    (if_blank if threads.startswith(NOT_RUN) else sections)[THREADS] = threads
    out = {}
    for path in sorted(docs.glob("*.md")):
        text = path.read_text()
        if MARKER.search(text):
            out[path] = rewrite(text, sections, if_blank)
    return out


def without_results(name: str) -> Callable[[str], str]:
    """A section this machine has no results for: "Not run yet" where the docs have
    nothing, else what they have (``legacy``)."""
    blank = section(name, None, ROOT)
    return lambda old: blank if not old.strip() else legacy(name)(old)


class UnknownSection(ValueError):
    """A section asked for by name that no document has; ``str()`` is one line."""


def section_names(docs: Path = ROOT / "docs") -> list[str]:
    """The names of the generated sections the documents in ``docs`` hold, sorted."""
    return sorted({m.group("name") for path in docs.glob("*.md") for m in MARKER.finditer(path.read_text())})


def report(check: bool = False, docs: Path = ROOT / "docs", results: Path = ROOT / "results",
           names: Optional[list[str]] = None) -> list[Path]:
    """Write the generated parts of the docs; with ``check``, write nothing and
    return the documents that differ from what the results give.  ``names``:
    only these sections; ``UnknownSection`` for a name no document has, which
    would otherwise rewrite nothing and pass the check."""
    if names is not None:
        known = section_names(docs)
        for name in names:
            if name not in known:
                raise UnknownSection(f"{name}: no document in {docs} has a generated section of that name "
                                     f"(there are: {', '.join(known)})")
    if names is None:
        from testbed.experiments.base import Settings, figure_experiments

        names = [spec.name for spec, _params in figure_experiments(Settings())]
    changed = []
    figures: dict[Path, bytes] = {}
    records: dict[Path, str] = {}
    for path, text in generated_docs(docs, results, names, figures, records).items():
        if path.read_text() != text:
            changed.append(path)
            if not check:
                path.write_text(text)
    for path, png in figures.items():
        if not path.is_file() or path.read_bytes() != png:
            changed.append(path)
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(png)
    if not check:
        # The results' own files, not the docs: never a difference to report.
        for path, text in records.items():
            path.write_text(text)
    return changed
