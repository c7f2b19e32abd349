"""The ``testbed`` command line (click)."""
from __future__ import annotations

import json
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn, Optional

import click

from testbed import ROOT
from testbed.semantics.limits import MAX_INT64, MAX_RUN_TIMEOUT_S, MAX_WINDOW_TIMEOUT_S
from testbed.semantics.topology import TopologyError, resolve_topology


def _fail(message: str, code: int) -> NoReturn:
    """One line on stderr, then exit ``code`` (2: bad input, 1: failure)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@contextmanager
def _run_errors():
    """One line and the right exit code for whatever stops a run or experiment."""
    from testbed.experiments.base import Interrupted
    from testbed.runs.orchestrator import PreflightError, RunError
    from testbed.runs.signals import RunInterrupted

    try:
        yield
    except PreflightError as err:
        _fail(str(err), 2)
    except RunError as err:
        _fail(str(err), 1)
    except (RunInterrupted, Interrupted, KeyboardInterrupt):
        click.echo("interrupted; everything started was stopped", err=True)
        sys.exit(130)
    except Exception as err:  # the run stopped what it started; say why in one line
        _fail(f"run failed: {type(err).__name__}: {err}", 1)


def _load(topology: str, switch_name: Optional[str] = None):
    """The topology file and its validated contents, plan included, its switch
    renamed to ``switch_name`` if given; else one line and exit 2."""
    from testbed.semantics.plan import load_planned

    try:
        path = resolve_topology(topology)
        topo = load_planned(path)[0]
        return path, topo.with_switch_name(switch_name) if switch_name else topo
    except TopologyError as err:
        _refuse(err)


def _node_name(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[str]:
    """A node name given as an option, checked before anything starts: it becomes interface names."""
    from testbed.rundir.names import UnsafeName, node_name

    try:
        return None if value is None else node_name(value, f"--{param.name.replace('_', '-')}")
    except UnsafeName as err:
        _refuse(err)


#: ``--switch-name``: runs beside other runs on one machine, each with its own interfaces.
switch_name_option = click.option(
    "--switch-name", default=None, callback=_node_name, expose_value=True,
    help="Name of the Mininet switch (to keep apart from others' runs); a node name, like the topology's.")


def _refuse(err: Exception | str) -> NoReturn:
    """Bad input: one line, exit 2, nothing started."""
    _fail(str(err), 2)


@contextmanager
def _run_dir_errors(run_dir: Path):
    """A run directory that cannot be read: one line naming it, exit 2."""
    from testbed.rundir import RunDirError

    try:
        yield
    except RunDirError as err:
        _refuse(err)
    except (OSError, KeyError, ValueError, TypeError) as err:    # pyarrow's errors are among these
        _refuse(f"{run_dir}: cannot read the run's data: {type(err).__name__}: {' '.join(str(err).split())}")


@click.group()
@click.version_option(package_name="p4-splitter-testbed")
def main() -> None:
    """In-network stream splitting testbed (S4 / P4SS on Mininet)."""


@main.command()
@click.argument("topology")
@click.option("--events", "-k", "n_events", default=12, show_default=True, type=click.IntRange(min=0),
              help="Show the operator set of the first K events of each stream.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def plan(topology: str, n_events: int, as_json: bool) -> None:
    """Show the splitter plan of TOPOLOGY: tables, multicast groups, first events."""
    from testbed.planview import plan_json, print_plan

    _path, topo = _load(topology)
    if as_json:
        click.echo(json.dumps(plan_json(topo, n_events), indent=2))
    else:
        print_plan(topo, n_events)


def _launch_scenario(topo, path: Path, target: Optional[str], out: Path, settings) -> bool:
    """One run of a scenario with an experiment's ``settings`` (its Spark: none, its own, or the shared warm one)."""
    from testbed.experiments.launch import launch
    from testbed.runs.orchestrator import RunOptions

    return launch(topo, path, RunOptions(target=target or topo.switch.target, out=out, spark=settings.spark,
                                         spark_master=settings.spark_master),
                  spark_service=settings.spark_service)


def _repeat_warm(name: str, times: int, folder: Path, settings, run_once, app: str):
    """``repeat_experiment`` of ``run_once(out, settings)`` into ``folder``, every
    repetition on one warm Spark application named ``app`` (unless ``settings``
    say otherwise); an interrupt or input that can never run stops them all."""
    from testbed.analysis.spark import warm_spark
    from testbed.experiments.base import Interrupted
    from testbed.experiments.repeat import repeat_experiment
    from testbed.runs.orchestrator import PreflightError
    from testbed.runs.signals import RunInterrupted

    folder.mkdir(parents=True, exist_ok=True)
    with warm_spark(folder / "spark", settings, app) as shared:
        return repeat_experiment(name, times, folder, lambda o: run_once(o, shared),
                                 fatal=(RunInterrupted, Interrupted, PreflightError),
                                 progress=lambda line: click.echo(line, err=True))


def _repeat(name: str, times: int, out: Optional[Path], settings, run_once) -> NoReturn:
    """Run ``run_once(out, settings)`` ``times`` times (``_repeat_warm``) and print
    how stable each verdict was; exit 0 only if all passed every time."""
    folder = out or ROOT / "results" / name / f"{time.strftime('%Y%m%d-%H%M%S')}-repeat"
    with _run_errors():
        stability = _repeat_warm(name, times, folder, settings, run_once, f"{name}-{folder.name}-spark")
    click.echo(stability.markdown(), nl=False)
    click.echo(f"stability: {folder / 'stability.md'}")
    sys.exit(0 if stability.ok else 1)


@main.command("stress")
@click.option("--suite-runs", type=click.IntRange(min=0, max=100), default=3, show_default=True,
              help="Runs of the test suite under load.")
@click.option("--repeat", type=click.IntRange(min=0, max=1000), default=5, show_default=True,
              help="Repetitions of each scenario under load.")
@click.option("--scenario", "scenarios", multiple=True,
              help="A scenario to repeat (default: the shipped nine, unless --experiment names what to repeat).")
@click.option("--experiment", "experiments", multiple=True,
              help="An experiment (experiments/NAME.yaml) to repeat as often, after the scenarios; "
                   "'all' for every shipped one.")
@click.option("--quick", is_flag=True, help="The experiments at their small size (their quick: sections).")
@click.option("--load", type=click.IntRange(min=1, max=100), default=50, show_default=True,
              help="Percent of each core stress-ng keeps busy.")
@click.option("--pytest-args", default="", help="Arguments for pytest, e.g. '-m unit'.")
@click.option("--target", type=click.Choice(["model", "bmv2"]), default=None)
@click.option("--no-spark", is_flag=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Default: results/stress/<id>/.")
def stress_command(suite_runs: int, repeat: int, scenarios: tuple[str, ...], experiments: tuple[str, ...],
                   quick: bool, load: int, pytest_args: str, target: Optional[str], no_spark: bool,
                   out: Optional[Path]) -> None:
    """Run the test suite, the shipped scenarios and experiments on a loaded machine; write a stability table."""
    import shlex

    from testbed.experiments.base import (
        ExperimentError,
        Settings,
        all_experiments,
        experiment_path,
        load_experiment,
        run_experiment,
    )
    from testbed.experiments.stress import SCENARIOS, stress, stress_ng_missing
    from testbed.runs.record import git_revision
    from testbed.runs.signals import Interrupts

    # Every scenario and experiment is checked before anything starts.
    names = list(scenarios or ([] if experiments else SCENARIOS))
    loaded = {name: _load(name) for name in names}
    settings = Settings(quick=quick, target=target, spark=not no_spark)
    if "all" in experiments:
        paths = all_experiments()
    else:
        paths = [experiment_path(name) for name in experiments]
        for name, path in zip(experiments, paths):
            if path is None:
                _refuse(f"--experiment {name}: no experiments/{name}.yaml")
    try:
        specs = {spec.name: (spec, params) for spec, params in (load_experiment(p, settings) for p in paths)}
    except ExperimentError as err:
        _refuse(str(err))
    missing = stress_ng_missing()
    if missing:
        _refuse(f"cannot load the machine: {missing}")

    def repeat_scenario(name: str, times: int, folder: Path):
        path, topo = loaded[name]
        return _repeat_warm(name, times, folder, settings, lambda o, s: _launch_scenario(topo, path, target, o, s),
                            f"stress-{name}-{folder.name}-spark")

    def repeat_an_experiment(name: str, times: int, folder: Path):
        spec, params = specs[name]
        return _repeat_warm(name, times, folder, settings, lambda o, s: run_experiment(spec, params, s, o),
                            f"stress-{name}-{folder.name}-spark")

    folder = out or ROOT / "results" / "stress" / time.strftime("%Y%m%d-%H%M%S")
    # SIGTERM, like Ctrl-C, unwinds through the load and the suite, which stop what they started.
    interrupts = Interrupts()
    interrupts.install()
    try:
        with _run_errors():
            report = stress(folder, suite_runs, repeat, names if repeat else [], shlex.split(pytest_args), load,
                            repeat_scenario, lambda line: click.echo(line, err=True),
                            setup={"revision": git_revision(), "target": target, "spark": not no_spark,
                                   "quick": quick},
                            experiments=list(specs) if repeat else [], repeat_experiment=repeat_an_experiment)
    finally:
        interrupts.restore()
    click.echo(report.markdown())
    click.echo(f"stability: {folder / 'stability.md'}")
    sys.exit(0 if report.ok else 1)


@main.command()
@click.argument("topology")
def validate(topology: str) -> None:
    """Check TOPOLOGY and exit 2 with a one-line error if it is not usable."""
    path, topo = _load(topology)
    racks = (f" ({len(topo.rack_of())} in {len(topo.racks)} racks), {topo.port_count()} splitter ports"
             if topo.racks else "")
    click.echo(f"{path}: ok ({len(topo.hosts)} hosts{racks}, {len(topo.streams)} streams)")


@main.command()
@click.argument("topology")
@click.option("--target", type=click.Choice(["model", "bmv2"]), default=None,
              help="Splitter target (default: the topology's switch.target).")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Run directory (default: results/<name>/<run id>/).")
@click.option("--seed", type=click.IntRange(0, MAX_INT64), default=None, help="Override the topology's seed.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True, max=MAX_RUN_TIMEOUT_S), default=None,
              help="Give up streaming after this many seconds.")
@click.option("--spark-master", default="local[*]", show_default=True,
              help="Master URL of the operators' Spark application (local[N], spark://host:port, ...).")
@click.option("--no-spark", is_flag=True, help="Only record deliveries; skip the windowed computation.")
@click.option("--pcap", is_flag=True, help="Capture every switch port into pcaps/ (tcpdump).")
@click.option("--switch-cpu", type=click.Choice(["fifo", "none"]), default="fifo", show_default=True,
              help="The switch process's CPU policy: fifo (real-time class, ahead of the rest) or none.")
@click.option("--spark-cpu", type=click.Choice(["idle", "nice", "normal"]), default="nice", show_default=True,
              help="Spark's CPU policy: idle (only what nothing else wants), nice (nice 10) or normal (nice 0).")
@click.option("--window-timeout", type=click.FloatRange(min=0, min_open=True, max=MAX_WINDOW_TIMEOUT_S),
              default=None, help="A window of the Spark operators that has not changed for this many seconds "
                                 "leaves marked incomplete (default: only at the end of the input); not with "
                                 "--no-spark.")
@click.option("--cli", type=click.Choice(["before", "after"]), is_flag=False, flag_value="before", default=None,
              help="Open Mininet's CLI before streaming (--cli; its `stream` command streams) "
                   "or after it (--cli=after).  Leaving the CLI finishes the run.")
@switch_name_option
def run(topology: str, target: Optional[str], out: Optional[Path], seed: Optional[int],
        timeout: Optional[float], spark_master: str, no_spark: bool, pcap: bool = False,
        cli: Optional[str] = None, switch_cpu: str = "fifo", spark_cpu: str = "nice",
        window_timeout: Optional[float] = None, switch_name: Optional[str] = None) -> None:
    """Emulate TOPOLOGY: network, splitter, operators, sources; then check the result."""
    from testbed.experiments.launch import RunOptionsError, check_options, launch
    from testbed.runs.orchestrator import RunOptions

    path, topo = _load(topology, switch_name)
    options = RunOptions(target=target or topo.switch.target, out=out, seed=seed, timeout=timeout,
                         spark=not no_spark, spark_master=spark_master, pcap=pcap, cli=cli, switch_cpu=switch_cpu,
                         spark_cpu=spark_cpu, window_timeout_s=window_timeout)
    try:
        check_options(options)       # what click cannot see: combinations (--window-timeout with --no-spark)
    except RunOptionsError as err:
        _refuse(f"--{err.field.removesuffix('_s').replace('_', '-')}: {err.message}")
    with _run_errors():
        ok = launch(topo, path, options)
    sys.exit(0 if ok else 1)


@main.command()
@click.argument("name")
@click.option("--target", type=click.Choice(["model", "bmv2"]), default=None,
              help="Measure on this target only (default: the experiment's targets).")
@click.option("--quick", is_flag=True, help="The experiment's small size (its quick: section), for tests.")
@click.option("--repeat", type=click.IntRange(min=1, max=1000), default=None,
              help="Run it this many times and report how stable each verdict was (results/<name>/<id>-repeat/).")
@switch_name_option
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Experiment directory (default: results/<name>/<id>/, or results/figures/<name>/ for all).")
@click.option("--param", "param_pairs", multiple=True, metavar="KEY=VALUE",
              help="Replace a parameter of the file (VALUE in YAML), e.g. --param 'parts=[scale]'.")
@click.option("--spark-master", default="local[*]", show_default=True)
@click.option("--no-spark", is_flag=True)
@click.option("--spark-per-run", is_flag=True,
              help="One Spark application per run, started and stopped with it, instead of one warm "
                   "application that the experiment's runs share.")
@click.pass_context
def experiment(ctx: click.Context, name: str, target: Optional[str], quick: bool, repeat: Optional[int],
               switch_name: Optional[str], out: Optional[Path], param_pairs: tuple[str, ...], spark_master: str,
               no_spark: bool, spark_per_run: bool = False) -> None:
    """Run experiment NAME (experiments/NAME.yaml), all of them (``all``), or a single scenario of that name.

    ``all`` regenerates every paper figure into results/figures/<name>/
    (not the bench or the soak: their files say ``in_figures: false``).
    """
    from testbed.experiments.base import (
        FIGURES_DIR,
        ExperimentError,
        Settings,
        experiment_path,
        figure_experiments,
        load_experiment,
        parse_params,
        run_experiment,
    )

    if target == "bmv2":
        # Asked for bmv2 by name: refuse before anything starts, rather than
        # skip the target as an experiment that lists both does on its own.
        from testbed.targets.bmv2.toolchain import toolchain_missing

        reason = toolchain_missing()
        if reason:
            _refuse(f"--target bmv2: {reason}")
    path = None if name == "all" else experiment_path(name)
    if repeat is not None and name == "all":
        _refuse("--repeat: name one experiment or scenario, not all")
    if name != "all" and path is None and param_pairs:
        # A scenario is a topology: it has no parameters, so a --param would be ignored.
        _refuse(f"--param: {name} is a scenario, not an experiment (experiments/{name}.yaml); "
                f"only an experiment file has parameters")
    if name != "all" and path is None:
        if repeat is not None:
            scenario, topo = _load(name, switch_name)
            shared = Settings(spark=not no_spark, spark_master=spark_master, warm_spark=not spark_per_run)
            _repeat(name, repeat, out, shared, lambda o, s: _launch_scenario(topo, scenario, target, o, s))
        ctx.invoke(run, topology=name, target=target, out=out, seed=None, timeout=None,
                   spark_master=spark_master, no_spark=no_spark, switch_name=switch_name)
        return
    try:
        settings = Settings(quick=quick, target=target, switch_name=switch_name, spark=not no_spark,
                            spark_master=spark_master, warm_spark=not spark_per_run, params=parse_params(param_pairs))
        loaded = figure_experiments(settings) if path is None else [load_experiment(path, settings)]
    except ExperimentError as err:       # every file is checked before anything starts
        click.echo(f"error: {err}", err=True)
        sys.exit(2)
    if repeat is not None:
        (spec, params), = loaded
        _repeat(spec.name, repeat, out, settings, lambda o, s: run_experiment(spec, params, s, o))
    ok = True
    for spec, params in loaded:
        where = out / spec.name if out and name == "all" else out
        if name == "all":
            where = where or FIGURES_DIR / spec.name
            if where.exists():
                shutil.rmtree(where)        # regenerated from scratch, never mixed with an older run
        with _run_errors():
            passed, expdir = run_experiment(spec, params, settings, where)
        ok = ok and passed
        click.echo(f"experiment {spec.name}: {'ok' if passed else 'CHECK FAILURES'}; {expdir.root}")
    sys.exit(0 if ok else 1)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
def check(run_dir: Path) -> None:
    """Judge a run again: deliveries (and windows) against the oracle, into its verdicts.json.

    The run's facts (run.json) are not touched.  Exit 1 on any violation.
    """
    from testbed.analysis.check import require_evidence
    from testbed.analysis.verdicts import evaluate, verdict_summary
    from testbed.rundir import RunDir

    rundir = RunDir(run_dir)
    with _run_dir_errors(run_dir):
        # Whether windows are judged is the record's word, not the files': a
        # run with Spark whose windows are gone is refused, not passed without them.
        record = require_evidence(rundir)
        verdicts = evaluate(record, rundir, with_windows=record.spark_started() or rundir.windows.exists())
    for line in verdict_summary(record, verdicts):
        click.echo(line)
    sys.exit(0 if verdicts.ok else 1)


@main.command()
@click.argument("run_a", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("run_b", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of lines.")
def compare(run_a: Path, run_b: Path, as_json: bool) -> None:
    """Where RUN_A and RUN_B differ, per stream, event and window; exit 1 when they do.

    For example the same seeded scenario on both targets, or before and
    after a change to the P4 program.
    """
    from testbed.analysis.check import require_run
    from testbed.analysis.compare import compare_runs, diff_lines
    from testbed.rundir import RunDir, RunDirError

    a, b = RunDir(run_a), RunDir(run_b)
    try:
        records = {"A": require_run(a, ("sources", "deliveries")), "B": require_run(b, ("sources", "deliveries"))}
        diffs = compare_runs(a, b)
    except RunDirError as err:
        _fail(str(err), 2)
    except (OSError, KeyError, ValueError, TypeError) as err:
        _fail(f"not two complete run directories ({type(err).__name__}: {err})", 2)
    same = all(d.same for d in diffs.values())
    if as_json:
        click.echo(json.dumps({"a": str(a.root), "b": str(b.root), "same": same,
                               "streams": {str(k): d.as_json() for k, d in diffs.items()}}, indent=2))
    else:
        for side, rundir in (("A", a), ("B", b)):
            record = records[side]
            click.echo(f"{side}: {rundir.root} ({record.name} on {record.target}, seed {record.seed})")
        for line in diff_lines(diffs):
            click.echo(line)
        click.echo("no difference" if same else "the runs differ")
    sys.exit(0 if same else 1)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
def plot(run_dir: Path) -> None:
    """Redraw the figures of a run or an experiment directory from its raw data."""
    from testbed.analysis.check import require_run
    from testbed.analysis.plots import plot_run
    from testbed.experiments.base import redraw
    from testbed.rundir import ExperimentDir, RunDir

    expdir = ExperimentDir(run_dir)
    if expdir.is_experiment():
        with _run_dir_errors(expdir.record):
            figures = redraw(expdir)
    else:
        rundir = RunDir(run_dir)
        with _run_dir_errors(run_dir):
            require_run(rundir, ("sources", "deliveries"), analysis=rundir.spark_analysis.exists())
            figures = plot_run(rundir)
    for p in figures:
        click.echo(str(p))


@main.command()
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the docs differ from what the results give.")
@click.option("--only", "only", multiple=True, metavar="NAME",
              help="Rewrite only these experiments' numbers (repeatable); the others stay as they are.")
def report(check: bool, only: tuple[str, ...]) -> None:
    """Write the docs' generated parts: the evaluation's numbers from results/, the run record's schema."""
    from testbed.experiments.report import UnknownSection
    from testbed.experiments.report import report as write_report
    from testbed.rundir import RunDirError

    try:
        changed = write_report(check=check, names=list(only) or None)
    except UnknownSection as err:
        _refuse(f"--only {err}")
    except RunDirError as err:           # a damaged experiment.json among the results
        _refuse(err)
    for path in changed:
        click.echo(f"{path}: {'differs from the results' if check else 'rewritten'}")
    if not changed:
        click.echo("the docs are what the results give")
    sys.exit(1 if check and changed else 0)


@main.command("switch-cli")
@click.argument("run_dir", required=False, type=click.Path(file_okay=False, path_type=Path))
def switch_cli(run_dir: Optional[Path]) -> None:
    """Open the runtime CLI of a running run's switch (the newest running run by default).

    On bmv2 this is bmv2's own simple_switch_CLI, run inside the switch's
    namespace; on the embedded target a CLI with the same commands and
    output.  Like simple_switch_CLI it reads a script from standard input.
    """
    from testbed.runs.attach import AttachError, attach

    try:
        code = attach(run_dir)
    except AttachError as err:
        _fail(str(err), 2)
    except OSError as err:
        _fail(f"cannot reach the switch: {err}", 1)
    sys.exit(code)


@main.command()
def clean() -> None:
    """Remove what crashed runs left: processes (by PID), interfaces, state files."""
    from testbed.emulation.cleanup import clean_stale

    for line in clean_stale():
        click.echo(line)


if __name__ == "__main__":  # pragma: no cover
    main()
