"""Variants of one topology: the same streams with one thing changed per run.

``variants: {name: patch}`` merges each patch into every stream of the
topology (``{window: {lateness: 120}}``, ``{split: key, keys: {...}}``),
validates the result as a topology, and runs it like any scenario, so a
bad patch fails before anything starts with the variant's name in the
message.  Two figures read the runs:

- ``lateness`` (experiment ``flights``): events dropped as too late and
  windows that differ from the centralized reference, against the lateness
  each variant allows (``analysis.plots.lateness_table``);
- ``skew`` (experiment ``skew``): per variant, the load per operator
  (largest over mean) and the state per operator (distinct keys an
  operator holds per window), window splitting against key splitting as
  the keys' Zipf exponent grows (``skew_table``).
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal, Optional

import pandas as pd
from pydantic import Field, field_validator, model_validator

from testbed.analysis.plots import lateness_table, plot_lateness, plt, save_figure
from testbed.experiments import paper
from testbed.experiments.base import ExperimentKind, KindParams
from testbed.experiments.capacity import ScenarioCalibration, calibrated, machine_capacity
from testbed.experiments.shipped import check_scenarios, plan_cost, scenario, scenario_run
from testbed.rundir import ExperimentDir, RunDir
from testbed.rundir.names import path_name
from testbed.semantics.strict import FieldError as _FieldError
from testbed.semantics.topology import Topology, TopologyError, parse_topology

#: Slash (``../shared/seeds/``, Fig. 10d, keys Zipf with z = 0.2 .. 2.0) on skew, and how our
#: measure relates to it: we measure the imbalance, Slash the throughput it costs.
SLASH_ON_SKEW = ("Slash Fig. 10d: hash partitioning (RDMA UpPar) loses up to 68 % of its RO throughput as "
                 "key skew grows, from load imbalance; Slash, not partitioning by key, keeps RO constant.\n"
                 "Here: the imbalance itself. With the largest operator at m times the mean, a key-split "
                 "pipeline runs at most 1/m of its even-load rate.")


def merged(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``patch`` merged in: mappings key by key, anything else replaced."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def variant(topo: Topology, name: str, patch: dict[str, Any], source: str) -> Topology:
    """``topo`` with ``patch`` merged into every stream, validated (``TopologyError`` names the variant)."""
    data = topo.model_dump(mode="json", exclude_defaults=False)
    data["streams"] = [merged(s, patch) for s in data["streams"]]
    return parse_topology(data, f"{source} (variant {name})")


class VariantParams(KindParams):
    topology: str = Field(description="a scenario name in topologies/ or a path")
    variants: dict[str, dict[str, Any]] = Field(min_length=1, description="run name -> patch of every stream")
    figure: Literal["lateness", "skew"]
    #: Variants whose lateness must cover the stream's disorder: no event too
    #: late, and every window equal to the centralized reference.
    exact: list[str] = []
    #: None: every variant at the topology's rates; else at rates this machine carries.
    calibration: Optional[ScenarioCalibration] = None

    @field_validator("variants")
    @classmethod
    def _folder_names(cls, variants: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name in variants:
            path_name(name, "variant name")       # each variant's runs are folders of the experiment
        return variants

    @model_validator(mode="after")
    def _named_variants(self):
        unknown = [n for n in self.exact if n not in self.variants]
        if unknown:
            raise _FieldError("exact", f"{unknown[0]!r} is not one of the variants")
        return self

    def topologies(self) -> dict[str, Topology]:
        check_scenarios([self.topology])
        path, topo = scenario(self.topology)
        out = {}
        for name, patch in self.variants.items():
            out[name] = variant(topo, name, patch, str(path))
        return out


class Variants(ExperimentKind):
    """Every variant once per target, and the variants' figure."""

    Params = VariantParams
    paper = {"s4_real_data": paper.S4_REAL_DATA, "slash_fig10d": paper.SLASH_FIG_10D}

    def measure(self) -> dict[str, Any]:
        path, _topo = scenario(self.params.topology)
        runs: dict[str, Any] = {}
        capacities: dict[str, float] = {}
        c = self.params.calibration
        for target in self.targets():
            if c is not None:
                capacities[target] = machine_capacity(self, target, c)
            for name, topo in self.params.topologies().items():
                entry: dict[str, Any] = {}
                if c is not None:
                    topo, entry = calibrated(topo, capacities[target], c.fraction)
                label = f"{name}-{target}"
                rundir = self.expdir.run(label)
                ok = scenario_run(topo, path, target, rundir, self.settings)
                runs[label] = {"ok": ok, "target": target, "variant": name,
                               "run_dir": str(rundir.root.relative_to(self.expdir.root)), **entry}
        out: dict[str, Any] = {"table": self.summary(runs), "runs": runs}
        if c is not None:
            out["calibration"] = {"capacity_events_per_s": capacities, "fraction": c.fraction,
                                  "scenario": c.scenario}
        return out

    def papers(self) -> dict[str, Any]:
        return {"lateness": {"s4_real_data": paper.S4_REAL_DATA},
                "skew": {"slash_fig10d": paper.SLASH_FIG_10D}}[self.params.figure]

    def summary(self, runs: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The figure's numbers per run, for the record (and the docs that ``testbed report`` writes)."""
        dirs = {label: RunDir(self.expdir.root / r["run_dir"]) for label, r in runs.items()}
        dirs = {label: d for label, d in dirs.items() if d.is_run() and d.read_verdicts() is not None}
        if not dirs:
            return {}
        if self.params.figure == "lateness":
            table = lateness_table(dirs)
            columns = ["lateness", "lateness_slides", "sent", "too_late", "windows", "windows_differing"]
        else:
            table = skew_table(dirs, runs)
            columns = ["split", "s", "load_max_over_mean", "keys_per_operator_window", "windows_equal_reference"]
        return {row["run"]: {c: row[c] for c in columns} for row in table.to_dict("records")}

    def ok(self, ours: dict[str, Any]) -> bool:
        runs = ours["runs"]
        if not runs or not all(r["ok"] for r in runs.values()):
            return False
        table = ours.get("table", {})
        for label, r in runs.items():
            if r["variant"] in self.params.exact:
                row = table.get(label, {})
                if row.get("too_late") != 0 or row.get("windows_differing") != 0:
                    self.log(f"{label}: {row.get('too_late')} events too late and {row.get('windows_differing')} "
                             f"windows differing, where the lateness should cover the disorder")
                    return False
        return True

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        try:
            return {name: plan_cost(topo) for name, topo in params.topologies().items()}
        except ValueError as err:
            raise TopologyError(str(err)) from None

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        entries = record["ours"]["runs"]
        runs = {label: RunDir(expdir.root / r["run_dir"]) for label, r in entries.items()}
        runs = {label: rundir for label, rundir in runs.items() if rundir.is_run()}
        figure = record["params"]["figure"]
        title = record["experiment"]["description"]
        if figure == "lateness":
            out = []
            for target in sorted({r["target"] for r in entries.values()}):
                mine = {label: rd for label, rd in runs.items() if entries[label]["target"] == target}
                fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
                table = plot_lateness(mine, axes)
                table.to_csv(expdir.raw / f"lateness-{target}.csv", index=False)
                fig.suptitle(f"{title} ({target})", fontsize=9)
                out.append(save_figure(fig, expdir.figure(f"lateness-{target}")))
            return out
        table = skew_table(runs, entries)
        table.to_csv(expdir.raw / "skew.csv", index=False)
        return [plot_skew(table, title, expdir.figure("skew"))]


def key_skew(stream: dict[str, Any]) -> float:
    """The Zipf exponent of a stream record's keys: 0 for uniform keys (and for none)."""
    keys = stream.get("keys") or {}
    return float(keys.get("s") or 0) if keys.get("distribution") == "zipf" else 0.0


def skew_table(runs: dict[str, RunDir], entries: dict[str, Any]) -> pd.DataFrame:
    """Per run: how it split, the keys' exponent, the load per operator (copies;
    largest over mean), the state per operator (distinct keys an operator holds
    in one window, mean and largest over its windows), and whether every
    window equals the reference."""
    rows = []
    for label, rundir in runs.items():
        record, verdicts = rundir.read_record(), rundir.read_verdicts()
        stream = next(iter(record.streams.values()))
        operators = list(stream["operators"])
        deliveries = pd.read_parquet(rundir.deliveries, columns=["operator"])
        load = deliveries["operator"].value_counts().reindex(operators, fill_value=0)
        windows = pd.read_parquet(rundir.windows, columns=["window", "operator", "key"]) \
            if rundir.windows.is_file() else None
        state = windows.groupby(["operator", "window"])["key"].nunique() if windows is not None else None
        window_ok = all(w.ok for w in verdicts.window_check.values()) if verdicts and verdicts.window_check else None
        name = entries[label]["variant"]
        rows.append({"run": label, "target": entries[label]["target"], "variant": name,
                     "split": stream.get("split", "windows"), "s": key_skew(stream),
                     "copies": int(load.sum()), "load_max_over_mean": float(load.max() / load.mean()),
                     "keys_per_operator_window": float(state.mean()) if state is not None else None,
                     "keys_per_operator_window_max": int(state.max()) if state is not None else None,
                     "distinct_keys": int(windows["key"].nunique()) if windows is not None else None,
                     "windows_equal_reference": window_ok})
    return pd.DataFrame(rows)


def plot_skew(table: pd.DataFrame, title: str, out: Path) -> Path:
    fig, (load_ax, state_ax) = plt.subplots(1, 2, figsize=(11, 4))
    # The targets split the same events the same way, so their points coincide: each
    # target gets its own marker, the first large and hollow, so neither hides the other.
    styles = {target: style for target, style in zip(sorted(table["target"].unique()), (
        {"marker": "o", "ms": 10, "mfc": "none", "ls": "-"}, {"marker": "x", "ms": 6, "ls": "--"}))}
    for (target, split), part in table.sort_values("s").groupby(["target", "split"]):
        label = f"split by {split} ({target})"
        style = styles.get(target, {"marker": "s", "ls": ":"})
        load_ax.plot(part["s"], part["load_max_over_mean"], label=label, **style)
        state_ax.plot(part["s"], part["keys_per_operator_window"], label=label, **style)
    load_ax.set_xlabel("Zipf exponent s of the keys (0: uniform)")
    load_ax.set_ylabel("load per operator: largest / mean (1 = even)")
    state_ax.set_xlabel("Zipf exponent s of the keys (0: uniform)")
    state_ax.set_ylabel("distinct keys an operator holds per window")
    for ax in (load_ax, state_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{title}\n{SLASH_ON_SKEW}", fontsize=8)
    return save_figure(fig, out)
