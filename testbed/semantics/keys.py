"""Key distributions for generated streams: uniform, or Zipf-skewed.

``keys: {distribution: zipf, s: 1.2, n: 10000}`` draws key ``k`` in
``0 .. n-1`` with probability proportional to ``1 / (k + 1)**s`` (key 0 is
the hottest); ``uniform`` gives every key ``1 / n``.  Zipf keys are drawn
by rejection-inversion (Hörmann and Derflinger, "Rejection-inversion to
generate variates from monotone discrete distributions", 1996), which is
exact for any ``s > 0`` and needs no table of ``n`` probabilities, so a
range of 10^8 keys costs no memory.  numpy's own ``zipf`` covers only
``s > 1`` over an unbounded range.
"""
from __future__ import annotations

import numpy as np


def _expm1_over(x: np.ndarray | float) -> np.ndarray:
    """``(exp(x) - 1) / x``, 1 at 0, without cancellation near it."""
    x = np.asarray(x, dtype=float)
    small = np.abs(x) < 1e-8
    safe = np.where(small, 1.0, x)
    return np.where(small, 1.0 + x / 2, np.expm1(safe) / safe)


def _log1p_over(x: np.ndarray | float) -> np.ndarray:
    """``log(1 + x) / x``, 1 at 0, without cancellation near it."""
    x = np.asarray(x, dtype=float)
    small = np.abs(x) < 1e-8
    safe = np.where(small, 1.0, x)
    return np.where(small, 1.0 - x / 2, np.log1p(safe) / safe)


class ZipfSampler:
    """Zipf(s) over ranks ``1 .. n``, drawn in batches from a numpy generator."""

    def __init__(self, n: int, s: float):
        if s <= 0:
            raise ValueError(f"zipf exponent {s} must be above 0")
        if n < 1:
            raise ValueError(f"a zipf distribution needs at least one key, not {n}")
        self.n, self.s = int(n), float(s)
        self.h_x1 = float(self._H(1.5)) - 1.0
        self.h_n = float(self._H(self.n + 0.5))
        self.squeeze = 2.0 - float(self._H_inv(self._H(2.5) - self._h(2.0)))

    def _h(self, x):
        return np.exp(-self.s * np.log(x))

    def _H(self, x):
        """An antiderivative of ``x**-s``: ``(x**(1-s) - 1) / (1-s)``, ``log x`` at s = 1."""
        log_x = np.log(x)
        return _expm1_over((1.0 - self.s) * log_x) * log_x

    def _H_inv(self, y):
        t = np.maximum(y * (1.0 - self.s), -1.0)
        return np.exp(_log1p_over(t) * y)

    def ranks(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` ranks in ``1 .. n``."""
        out = np.empty(size, dtype=np.int64)
        todo = np.arange(size)
        while len(todo):
            u = self.h_n + rng.random(len(todo)) * (self.h_x1 - self.h_n)
            x = self._H_inv(u)
            k = np.clip(np.floor(x + 0.5), 1, self.n)
            accept = (k - x <= self.squeeze) | (u >= self._H(k + 0.5) - self._h(k))
            out[todo[accept]] = k[accept].astype(np.int64)
            todo = todo[~accept]
        return out


def draw_keys(rng: np.random.Generator, n_events: int, distribution: str, n_keys: int,
              s: float | None = None) -> np.ndarray:
    """``n_events`` keys in ``0 .. n_keys-1``: uniform, or Zipf with exponent ``s``."""
    if distribution == "uniform":
        return rng.integers(0, n_keys, n_events, dtype=np.int64)
    if distribution == "zipf":
        return ZipfSampler(n_keys, s).ranks(rng, n_events) - 1
    raise ValueError(f"unknown key distribution {distribution!r}")
