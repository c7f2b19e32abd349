"""Replay files: a CSV or Parquet file whose rows become a stream's events.

``read_replay`` is the one reader: the topology loader calls it to check a
file before anything starts, and the workload calls it to send the rows.
It refuses, with ``ReplayError`` naming the column and the row, anything
the wire or the raw data cannot carry: text where a number belongs, empty
cells, fractional or negative timestamps, values outside int64, fewer rows
than the stream's ``events``, and files pandas or pyarrow cannot parse.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from testbed.rundir.files import why_unreadable
from testbed.semantics.limits import MAX_CSV_HEADER_BYTES, MAX_INT64, MAX_REPLAY_COLUMNS
from testbed.semantics.yamlfile import shorten_path

SUFFIXES = (".csv", ".parquet")


class ReplayError(ValueError):
    """A replay file that cannot be sent; ``field`` is ``ts``, ``value``, ``key`` or ``path``."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def columns(file: Path) -> list[str]:
    """The column names of a replay file, from its header or schema only; a
    header over ``MAX_CSV_HEADER_BYTES`` or more than ``MAX_REPLAY_COLUMNS``
    columns is refused without parsing the rest."""
    try:
        if file.suffix == ".parquet":
            import pyarrow.parquet as pq
            names = list(pq.read_schema(file).names)
        else:
            with open(file, "rb") as f:
                first = f.readline(MAX_CSV_HEADER_BYTES + 1)
            if len(first) > MAX_CSV_HEADER_BYTES:
                raise ReplayError("path", f"{file.name}'s header line is longer than {MAX_CSV_HEADER_BYTES} bytes")
            names = list(pd.read_csv(file, nrows=0, encoding="utf-8").columns)
    except (OSError, ValueError, UnicodeDecodeError) as err:
        if isinstance(err, ReplayError):
            raise
        raise ReplayError("path", f"cannot read {file.name}: {_reason(err)}") from None
    if len(names) > MAX_REPLAY_COLUMNS:
        raise ReplayError("path", f"{file.name} has {len(names)} columns, more than {MAX_REPLAY_COLUMNS}")
    return names


def read_replay(file: Path, ts: str, value: str, key: Optional[str], n: int) -> dict[str, np.ndarray]:
    """The first ``n`` rows as int64 columns ``ts``, ``value`` (rounded) and ``key`` (0 without one)."""
    wanted = {"ts": ts, "value": value} | ({"key": key} if key else {})
    try:
        if file.suffix == ".parquet":
            frame = pd.read_parquet(file, columns=list(dict.fromkeys(wanted.values())))
        else:
            # All columns are read, not just the wanted ones: only then does pandas
            # refuse a row with more fields than the header.
            frame = pd.read_csv(file, nrows=n, encoding="utf-8", dtype=str, keep_default_na=False)
    except (OSError, ValueError, UnicodeDecodeError) as err:   # pandas' and pyarrow's parse errors are ValueErrors
        raise ReplayError("path", f"cannot read {file.name}: {_reason(err)}") from None
    if len(frame) < n:
        raise ReplayError("path", f"{file.name} has {len(frame)} rows, fewer than the stream's events ({n})")
    frame = frame.iloc[:n]
    out = {name: _numbers(frame[col], file, name, col, integral=name != "value") for name, col in wanted.items()}
    if (out["ts"] < 0).any():
        raise ReplayError("ts", f"{file.name} {_row(file, int(np.argmax(out['ts'] < 0)))}: "
                                f"negative timestamp {out['ts'][out['ts'] < 0][0]}")
    out.setdefault("key", np.zeros(n, dtype=np.int64))
    return out


def _numbers(column: pd.Series, file: Path, field: str, name: str, integral: bool) -> np.ndarray:
    """One column as int64, refusing text, empty cells, fractions (when ``integral``) and overflow."""
    def refuse(index: int, what: str) -> ReplayError:
        return ReplayError(field, f"{file.name} {_row(file, index)}: column {name!r} holds "
                                  f"{column.iloc[index]!r}, {what}")

    series = column
    if series.dtype == object or pd.api.types.is_string_dtype(series.dtype):
        # Text from a CSV, or Python objects from Parquet (decimals, say): numbers either way, or refused.
        texts = series.map(lambda v: v.strip() if isinstance(v, str) else v)
        series = pd.to_numeric(texts, errors="coerce")
    if pd.api.types.is_bool_dtype(series.dtype) or not pd.api.types.is_numeric_dtype(series.dtype):
        raise ReplayError(field, f"column {name!r} of {file.name} is not numeric ({column.dtype})")
    missing = series.isna().to_numpy()
    if missing.any():
        raise refuse(int(np.argmax(missing)), "not a number")
    if pd.api.types.is_integer_dtype(series.dtype):
        values = series.to_numpy()
        if values.dtype.kind == "u" and (values > MAX_INT64).any():
            raise refuse(int(np.argmax(values > MAX_INT64)), "outside the 64-bit signed range")
        return values.astype(np.int64)
    values = series.to_numpy(dtype=np.float64)
    checks = [(~np.isfinite(values), "not a finite number")]
    if integral:
        checks.append((np.isfinite(values) & (values % 1 != 0), "not an integer"))
    checks.append((np.abs(np.round(values)) >= 2.0 ** 63, "outside the 64-bit signed range"))
    for bad, what in checks:
        if bad.any():
            raise refuse(int(np.argmax(bad)), what)
    return np.round(values).astype(np.int64)


def _row(file: Path, index: int) -> str:
    """Where row ``index`` (0-based, data rows) is: a CSV line (after the header) or a Parquet row."""
    return f"line {index + 2}" if file.suffix == ".csv" else f"row {index}"


def _reason(err: Exception) -> str:
    text = str(getattr(err, "strerror", None) or err).strip()
    return " ".join(text.split())


def resolve_replays(topo: Any, path: Path, error: type[Exception] = ValueError) -> Any:
    """``topo`` (a ``Topology`` read from ``path``) with its replay paths made absolute, once
    each file is found to hold its stream's events; else ``error`` with one line."""
    streams = []
    for i, s in enumerate(topo.streams):
        if s.replay is not None:
            file = Path(s.replay.path)
            if not file.is_absolute():
                file = path.parent / file
            where = f"{path}: streams[{i}].replay"
            problem = why_unreadable(file)
            if problem:
                raise error(f"{where}.path: {problem}: {shorten_path(file)}")
            file = file.resolve()
            if file.suffix not in SUFFIXES:
                raise error(f"{where}.path: must be .csv or .parquet")
            try:
                found = columns(file)
                for field_name in ("ts", "value", "key"):
                    col = getattr(s.replay, field_name)
                    if col is not None and col not in found:
                        raise ReplayError(field_name, f"no column {col!r} in {file.name}")
                read_replay(file, s.replay.ts, s.replay.value, s.replay.key, s.events)
            except ReplayError as err:
                raise error(f"{where}.{err.field}: {err.message}") from None
            s = s.model_copy(update={"replay": s.replay.model_copy(update={"path": str(file)})})
        streams.append(s)
    return topo.model_copy(update={"streams": streams})
