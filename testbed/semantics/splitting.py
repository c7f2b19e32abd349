"""How a stream's events are divided among its operators: by window or by key.

``windows`` (the papers' splitting) gives window ``j`` to operator ``j mod N``,
so an event in several windows is copied to each of their operators
(``testbed.semantics.windows``).  ``key`` gives every event to operator
``crc32(key) mod N``, with all of its windows, so each key's windows live on
one operator.  This module holds the key hash that the P4 program, the
embedded model, the oracle and the Spark reference share
(docs/windows.md, "Splitting by key").

The hash is CRC-32 (IEEE 802.3, reflected, initial value and final XOR
0xFFFFFFFF: zlib's, and bmv2's ``HashAlgorithm.crc32``) over the 8 bytes of
the key in network order, as the event header carries it.
"""
from __future__ import annotations

import zlib
from typing import Literal, Sequence

import numpy as np

SplitKind = Literal["windows", "key"]
SPLITS: tuple[str, ...] = ("windows", "key")

_U64 = (1 << 64) - 1


def key_hash(key: int) -> int:
    """CRC-32 of the key's 8 wire bytes (a negative key as its two's complement)."""
    return zlib.crc32((int(key) & _U64).to_bytes(8, "big"))


def key_operator(key: int, n_operators: int) -> int:
    """Index of the operator a key-split stream's event with ``key`` goes to."""
    return key_hash(key) % n_operators


def _crc_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0xEDB88320), table >> 1)
    return table.astype(np.uint32)


_TABLE = _crc_table()


def key_hashes(keys: np.ndarray) -> np.ndarray:
    """``key_hash`` of every key of an array, vectorized (one table step per byte)."""
    k = np.asarray(keys, dtype=np.int64).astype(np.uint64)
    crc = np.full(k.shape, 0xFFFFFFFF, dtype=np.uint32)
    for shift in range(56, -8, -8):
        byte = ((k >> np.uint64(shift)) & np.uint64(0xFF)).astype(np.uint32)
        crc = _TABLE[(crc ^ byte) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


def key_owners(keys: np.ndarray, operators: Sequence[str]) -> np.ndarray:
    """The operator name each key goes to, for an array of keys."""
    index = key_hashes(keys).astype(np.int64) % len(operators)
    return np.asarray(operators, dtype=object)[index]
