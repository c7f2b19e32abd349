"""The operators' pandas fold of partial aggregates, against a loop over the definitions."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.semantics.partials import PARTIAL_COLUMNS, fold
from testbed.semantics.queries import QUERY_KINDS, query

copies_rows = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["o1", "o2"]), st.integers(0, 4),
                                 st.integers(0, 3)), min_size=0, max_size=40)


def by_loop(rows, q):
    """The partials by their definitions, one group at a time."""
    out = {}
    for seq, (window, owner, key, value) in enumerate(rows):
        gkey = key if q.group_by_key else 0
        g = out.setdefault((window, owner, gkey), {"n": 0, "sum": 0, "min": None, "max": None, "best": None,
                                                    "events": 0, "last_seq": -1})
        g["events"] += 1
        g["last_seq"] = max(g["last_seq"], seq)
        if q.only_value is not None and value != q.only_value:
            continue
        g["n"] += 1
        g["sum"] += value
        g["min"] = value if g["min"] is None else min(g["min"], value)
        g["max"] = value if g["max"] is None else max(g["max"], value)
        g["best"] = max(g["best"] or (value, -key), (value, -key))
    return {k: (g["n"], g["sum"], g["min"] or 0, g["max"] or 0, *(g["best"] or (0, 0)), g["events"], g["last_seq"])
            for k, g in out.items()}


@pytest.mark.parametrize("kind", QUERY_KINDS)
@settings(max_examples=40, deadline=None)
@given(rows=copies_rows)
def test_fold_equals_the_definitions(kind, rows):
    q = query(kind)
    copies = pd.DataFrame({"stream": 1, "seq": np.arange(len(rows), dtype=np.int64),
                           "window": [r[0] for r in rows], "owner": [r[1] for r in rows],
                           "key": [r[2] for r in rows], "value": [r[3] for r in rows]}).astype(
        {"window": "int64", "key": "int64", "value": "int64"})
    got = fold(copies, q)
    assert list(got.columns) == PARTIAL_COLUMNS
    table = {(r.window, r.owner, r.gkey): (r.n, r.sum, r.min, r.max, r.best_value, r.best_negkey, r.events,
                                            r.last_seq) for r in got.itertuples()}
    assert table == by_loop(rows, q)


def test_sums_stay_exact_past_float_precision():
    big = 2**60 + 1
    copies = pd.DataFrame({"stream": [1, 1], "seq": [0, 1], "window": [0, 0], "owner": ["o1", "o1"],
                           "key": [0, 0], "value": [big, 2]})
    row = fold(copies, query("sum")).iloc[0]
    assert row["sum"] == big + 2 and row["max"] == big and row["best_value"] == big
