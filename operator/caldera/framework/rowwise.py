"""One formula, run over numpy columns (many nodes) or on one node's plain floats (a few).

After a workload's first pod the score cache asks each per-node scorer for a handful of rows: the
nodes that changed since. On so few rows numpy's per-call overhead is nearly all the cost (about a
microsecond a call, 15 to 40 calls a scorer), while the same formula on Python floats costs about
a microsecond a row. A formula written against :class:`Math` runs on whole columns with
:data:`COLUMNS` and row by row with :data:`ROW`. Both are IEEE double arithmetic with the same
floor division (Python's float ``//`` and numpy's ``floor_divide`` use one algorithm), so the
scores agree bit for bit; the tests compare the two on random tables.

:func:`evaluate` picks the way by the number of rows: row by row up to :data:`FEW_ROWS`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["COLUMNS", "FEW_ROWS", "ROW", "Math", "Num", "evaluate"]

FEW_ROWS = 8
"""Up to this many rows a formula runs row by row (measured: about where the two cost the same)."""

Num = Any
"""A float (one row) or a float64 column (many)."""


class Math:
    """The operations a formula needs besides ``+ - * /`` and comparisons, on numpy columns."""

    __slots__ = ()

    @staticmethod
    def where(cond: Num, a: Num, b: Num) -> Num:
        return np.where(cond, a, b)

    @staticmethod
    def minimum(a: Num, b: Num) -> Num:
        return np.minimum(a, b)

    @staticmethod
    def abs(a: Num) -> Num:
        return np.abs(a)

    @staticmethod
    def trunc(a: Num) -> Num:
        return np.trunc(a)

    @staticmethod
    def floordiv(a: Num, b: Num) -> Num:
        return np.floor_divide(a, b)


class _Row(Math):
    """The same operations on Python floats (``where`` takes both branches already computed)."""

    __slots__ = ()

    @staticmethod
    def where(cond: Num, a: Num, b: Num) -> Num:
        return a if cond else b

    minimum = staticmethod(min)  # type: ignore[assignment]
    abs = staticmethod(abs)  # type: ignore[assignment]
    floordiv = staticmethod(operator.floordiv)  # type: ignore[assignment]

    @staticmethod
    def trunc(a: Num) -> Num:
        return float(math.trunc(a))


COLUMNS = Math()
ROW: Math = _Row()


def evaluate(
    formula: Callable[..., Num],
    rows: npt.NDArray[np.intp],
    *sources: npt.NDArray[np.float64],
    args: tuple[float, ...] = (),
) -> npt.NDArray[np.float64]:
    """``formula(math, *args, *values)`` for each of ``rows``, where the values are the row's
    entries in each source matrix, in order (per row: floats; over many rows: columns)."""
    if len(rows) <= FEW_ROWS:
        picked = [source[rows].tolist() for source in sources]
        return np.array(
            [
                formula(ROW, *args, *chain.from_iterable(values))
                for values in zip(*picked, strict=True)
            ],
            dtype=np.float64,
        )
    columns = [column for source in sources for column in source[rows].T]
    out: npt.NDArray[np.float64] = np.asarray(formula(COLUMNS, *args, *columns), dtype=np.float64)
    if out.ndim == 0:  # the formula read no column (nothing it scores is requested)
        out = np.full(len(rows), out, dtype=np.float64)
    return out
