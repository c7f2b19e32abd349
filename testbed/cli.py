"""The ``testbed`` command line (click)."""
from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import click

from testbed.semantics.limits import MAX_INT64
from testbed.semantics.topology import TopologyError, resolve_topology


@contextmanager
def _run_errors():
    """One line and the right exit code for whatever stops a run or experiment."""
    from testbed.runs.orchestrator import PreflightError, RunError
    from testbed.runs.signals import RunInterrupted

    try:
        yield
    except PreflightError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(2)
    except RunError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(1)
    except (RunInterrupted, KeyboardInterrupt):
        click.echo("interrupted; everything started was stopped", err=True)
        sys.exit(130)
    except Exception as err:  # the run stopped what it started; say why in one line
        click.echo(f"error: run failed: {type(err).__name__}: {err}", err=True)
        sys.exit(1)


def _load(topology: str):
    """The topology file and its validated contents, plan included; else one line and exit 2."""
    from testbed.semantics.plan import load_planned

    try:
        path = resolve_topology(topology)
        return path, load_planned(path)[0]
    except TopologyError as err:
        _refuse(err)


def _refuse(err: Exception) -> None:
    click.echo(f"error: {err}", err=True)
    sys.exit(2)


@contextmanager
def _run_dir_errors(run_dir: Path):
    """A run directory that cannot be read: one line naming it, exit 2."""
    from testbed.runs.rundir import RunDirError

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


@main.command()
@click.argument("topology")
def validate(topology: str) -> None:
    """Check TOPOLOGY and exit 2 with a one-line error if it is not usable."""
    path, topo = _load(topology)
    click.echo(f"{path}: ok ({len(topo.hosts)} hosts, {len(topo.streams)} streams)")


@main.command()
@click.argument("topology")
@click.option("--target", type=click.Choice(["model", "bmv2"]), default=None,
              help="Splitter target (default: the topology's switch.target).")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Run directory (default: results/<name>/<run id>/).")
@click.option("--seed", type=click.IntRange(0, MAX_INT64), default=None, help="Override the topology's seed.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True, max=1e9), default=None,
              help="Give up streaming after this many seconds.")
@click.option("--spark-master", default="local[*]", show_default=True,
              help="Master URL of the operators' Spark application (local[N], spark://host:port, ...).")
@click.option("--no-spark", is_flag=True, help="Only record deliveries; skip the windowed computation.")
@click.option("--pcap", is_flag=True, help="Capture every switch port into pcaps/ (tcpdump).")
def run(topology: str, target: Optional[str], out: Optional[Path], seed: Optional[int],
        timeout: Optional[float], spark_master: str, no_spark: bool, pcap: bool = False) -> None:
    """Emulate TOPOLOGY: network, splitter, operators, sources; then check the result."""
    from testbed.runs.orchestrator import Run, RunOptions

    path, topo = _load(topology)
    options = RunOptions(target=target or topo.switch.target, out=out, seed=seed, timeout=timeout,
                         spark=not no_spark, spark_master=spark_master, pcap=pcap)
    with _run_errors():
        ok = Run(topo, path, options).execute()
    sys.exit(0 if ok else 1)


@main.command()
@click.argument("name")
@click.option("--target", type=click.Choice(["model", "bmv2"]), default=None)
@click.option("--spark-master", default="local[*]", show_default=True)
@click.option("--no-spark", is_flag=True)
@click.pass_context
def experiment(ctx: click.Context, name: str, target: Optional[str], spark_master: str, no_spark: bool) -> None:
    """Run experiment NAME (experiments/NAME.yaml), or a single scenario of that name."""
    from testbed.runs.experiment import experiment_path, load_experiment, run_experiment
    from testbed.runs.orchestrator import Run, RunOptions

    path = experiment_path(name)
    if path is None:
        ctx.invoke(run, topology=name, target=target, out=None, seed=None, timeout=None,
                   spark_master=spark_master, no_spark=no_spark)
        return
    try:
        exp = load_experiment(path)
    except TopologyError as err:
        _refuse(err)

    def make_run(topo, topo_path, run_dir):
        opts = RunOptions(target=target or topo.switch.target, out=run_dir, spark=not no_spark,
                          spark_master=spark_master)
        click.echo(f"== {exp.name}: {topo.name} on {opts.target}", err=True)
        return Run(topo, topo_path, opts).execute()

    with _run_errors():
        ok, out = run_experiment(exp, make_run)
    click.echo(f"experiment {exp.name}: {'all runs passed their checks' if ok else 'CHECK FAILURES'}; {out}")
    sys.exit(0 if ok else 1)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
def check(run_dir: Path) -> None:
    """Compare a run's deliveries with the oracle; exit 1 on any violation."""
    from testbed.analysis.check import check_run, check_windows, summary_lines, window_summary_lines
    from testbed.runs.rundir import RunDir

    rundir = RunDir(run_dir)
    with _run_dir_errors(run_dir):
        with_windows = rundir.windows.exists()
        record = rundir.require(("sources", "deliveries") + (("windows", "windows_reference") if with_windows else ()))
        results = check_run(rundir)
        windows = check_windows(rundir) if with_windows else {}
    lines = summary_lines(results) + window_summary_lines(windows)
    spark = record.get("spark")
    if not with_windows and isinstance(spark, dict) and spark.get("error"):
        lines.append(f"windows: not computed (the Spark application failed: {spark['error'].splitlines()[0]})")
    for line in lines:
        click.echo(line)
    ok = all(r.ok for r in results.values()) and all(w.ok for w in windows.values())
    sys.exit(0 if ok else 1)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
def plot(run_dir: Path) -> None:
    """Redraw a run's figures from its raw data."""
    from testbed.analysis.plots import plot_run
    from testbed.runs.rundir import RunDir

    rundir = RunDir(run_dir)
    with _run_dir_errors(run_dir):
        rundir.require(("sources", "deliveries"), analysis=rundir.spark_analysis.exists())
        figures = plot_run(rundir)
    for p in figures:
        click.echo(str(p))


@main.command()
def clean() -> None:
    """Remove what crashed runs left: processes (by PID), interfaces, state files."""
    from testbed.emulation.cleanup import clean_stale

    for line in clean_stale():
        click.echo(line)


if __name__ == "__main__":  # pragma: no cover
    main()
