"""An operator's partial aggregates of its windows, folded from its copies.

Every query keeps the same partials per (stream, window, owner, group key)
(``testbed.semantics.queries``): ``n``, ``sum``, ``min`` and ``max`` over
the events the query counts, the best (value, -key) pair among them, and
``events`` and ``last_seq`` over all of them, which tell the live merger
when a count window is complete.  A group whose events the query filters
out entirely has ``n`` = 0 and is no window of the output.

``fold`` is what the operators compute on Spark's executors, one pandas
frame of exploded copies at a time (``operators/window_job.py``, inside one
``mapInPandas`` stage).  The centralized reference folds its events with
Spark SQL instead, so the two are computed independently and the check
compares them.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from testbed.semantics.queries import QueryDef

GROUP_KEYS = ["stream", "window", "owner", "gkey"]
#: The columns of a fold, in order: the group, then the partials (all int64 but ``owner``).
PARTIAL_COLUMNS = GROUP_KEYS + ["n", "sum", "min", "max", "best_value", "best_negkey", "events", "last_seq"]


def fold(copies: pd.DataFrame, q: QueryDef) -> pd.DataFrame:
    """Partials of ``copies`` (of streams that share the query: ``stream``,
    ``seq``, ``key``, ``value``, ``window``, ``owner``; one row per copy and
    window) under ``q``."""
    if copies.empty:
        return pd.DataFrame({c: pd.Series(dtype="object" if c == "owner" else "int64") for c in PARTIAL_COLUMNS})
    values = copies["value"].to_numpy(dtype=np.int64)
    keys = copies["key"].to_numpy(dtype=np.int64)
    counted = np.ones(len(copies), dtype=bool) if q.only_value is None else values == q.only_value
    # integers throughout (a float would round sums past 2**53): uncounted events add nothing
    frame = pd.DataFrame({"stream": copies["stream"].to_numpy(), "window": copies["window"].to_numpy(),
                          "owner": copies["owner"].to_numpy(),
                          "gkey": keys if q.group_by_key else np.zeros(len(copies), np.int64),
                          "counted": counted.astype(np.int64), "sum": np.where(counted, values, 0),
                          "min": np.where(counted, values, np.iinfo(np.int64).max),
                          "max": np.where(counted, values, np.iinfo(np.int64).min),
                          "value": values, "negkey": -keys, "seq": copies["seq"].to_numpy(dtype=np.int64)})
    out = frame.groupby(GROUP_KEYS, sort=False).agg(
        n=("counted", "sum"), sum=("sum", "sum"), min=("min", "min"), max=("max", "max"),
        events=("seq", "size"), last_seq=("seq", "max")).reset_index()
    # the highest value, the lowest key on ties: the first counted row after sorting by (value, -key) descending
    best = (frame[counted].sort_values(["value", "negkey"], ascending=False, kind="stable")
            .drop_duplicates(GROUP_KEYS)[GROUP_KEYS + ["value", "negkey"]]
            .rename(columns={"value": "best_value", "negkey": "best_negkey"}))
    out = out.merge(best, on=GROUP_KEYS, how="left")
    none = out["n"].to_numpy() == 0
    out.loc[none, ["min", "max"]] = 0
    out[["best_value", "best_negkey"]] = out[["best_value", "best_negkey"]].fillna(0)
    return out.astype({c: "int64" for c in PARTIAL_COLUMNS if c != "owner"})[PARTIAL_COLUMNS]
