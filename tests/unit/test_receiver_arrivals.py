"""``Arrivals``: what a receiver records of the copies it gets, unpacked at
once when a part is written, is what unpacking each event as it came gives."""
import random

import pytest

from testbed.dataplane.wire import BATCH_STRUCT, EVENT_STRUCT, FLAG_WINDOWS, WINDOWS_STRUCT
from testbed.emulation.receiver import COLUMNS, Arrivals

pytestmark = pytest.mark.unit


def event(rng: random.Random, flags: int) -> tuple[bytes, tuple]:
    fields = (rng.randrange(1 << 16), flags, rng.randrange(1 << 32), rng.randrange(1 << 63),
              rng.randrange(1 << 64), rng.randrange(1 << 64) - (1 << 63))
    return EVENT_STRUCT.pack(*fields), fields


def header(rng: random.Random) -> tuple[bytes, tuple]:
    fields = (rng.randrange(1 << 63), rng.randrange(1 << 32), rng.randrange(1 << 16), rng.randrange(1 << 16),
              rng.randrange(1 << 63), rng.randrange(1 << 32), rng.randrange(1 << 16), rng.randrange(1 << 16))
    return WINDOWS_STRUCT.pack(*fields), fields


def row(fields: tuple, windows: tuple | None, now: int) -> dict:
    """One event as the receiver's columns hold it: the definition, event by event."""
    stream, _flags, seq, ts, key, value = fields
    key = key - (1 << 64) if key >= 1 << 63 else key        # the key column is signed
    w = windows[:7] if windows is not None else (0,) * 7
    return dict(zip(COLUMNS, (stream, seq, ts, key, value, now) + w))


def datagrams(rng: random.Random):
    """(kind, bytes, receive time, the rows it must give) for every shape a copy can have."""
    for now in range(10**18, 10**18 + 300_000, 1_000):
        shape = rng.choice(["event+header", "event, header not flagged", "event flagged, no room", "short",
                            "batch", "batch cut short", "batch without headers", "batch header only"])
        if shape.startswith("event") or shape == "short":
            with_flag = shape != "event, header not flagged"
            ev, fields = event(rng, FLAG_WINDOWS if with_flag else 0)
            hdr, windows = header(rng)
            if shape == "event+header":
                yield "event", ev + hdr, now, [row(fields, windows, now)]
            elif shape == "event, header not flagged":
                yield "event", ev + hdr, now, [row(fields, None, now)]       # bytes there, but not a header
            elif shape == "event flagged, no room":
                yield "event", ev + hdr[:10], now, [row(fields, None, now)]
            else:
                yield "event", ev[:20], now, []
            continue
        count = rng.randint(1, 16)
        headers = shape != "batch without headers"
        body, rows = b"", []
        for _ in range(count):
            ev, fields = event(rng, FLAG_WINDOWS if headers else 0)
            hdr, windows = header(rng) if headers else (b"", None)
            body += ev + hdr
            rows.append(row(fields, windows, now))
        data = BATCH_STRUCT.pack(count, FLAG_WINDOWS if headers else 0) + body
        if shape == "batch cut short":
            each = len(body) // count
            data, rows = data[:-each - 5], rows[:-2]             # the last two events incomplete
        elif shape == "batch header only":
            data, rows = data[:3], []
        yield "batch", data, now, rows


def test_a_part_holds_each_event_as_unpacking_it_on_arrival_would():
    rng = random.Random(5)
    arrivals, expected, counted = Arrivals(), [], 0
    for kind, data, now, rows in datagrams(rng):
        counted += (arrivals.batch if kind == "batch" else arrivals.event)(memoryview(data), now)
        expected += rows
    columns = arrivals.columns()
    got = [dict(zip(COLUMNS, values)) for values in zip(*(columns[c].tolist() for c in COLUMNS))]
    assert counted == len(arrivals) == len(expected) > 100
    assert got == expected


def test_no_arrivals_give_empty_columns():
    columns = Arrivals().columns()
    assert list(columns) == list(COLUMNS) and all(len(v) == 0 for v in columns.values())


def test_a_batch_saying_more_events_than_it_holds_records_those_it_holds():
    rng = random.Random(9)
    ev, fields = event(rng, FLAG_WINDOWS)
    hdr, windows = header(rng)
    arrivals = Arrivals()
    assert arrivals.batch(memoryview(BATCH_STRUCT.pack(5, FLAG_WINDOWS) + ev + hdr + ev[:7]), 42) == 1
    assert [arrivals.columns()[c][0] for c in COLUMNS] == list(row(fields, windows, 42).values())
