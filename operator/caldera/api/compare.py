"""Resource-vector comparisons with Volcano's semantics, shared by the quota plugins.

All comparisons tolerate float rounding (quantities are whole engine units, so a tolerance of a
tenth of a unit can never hide a real difference) and look only at quota columns (never the
implicit pod slot).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from caldera.api.resources import ResourceSpace, Vector
from caldera.quantity import format_resource

__all__ = ["EPS", "ShareMeter", "le_all", "le_where", "share", "short_names"]

EPS = 0.1


def le_all(space: ResourceSpace, left: Vector, right: Vector) -> bool:
    """left ≤ right in every quota dimension (Volcano's ``LessEqual``)."""
    q = space.quota
    return bool((left[q] <= right[q] + EPS).all())  # the method: np.all's wrapper costs more


def le_where(space: ResourceSpace, left: Vector, right: Vector, dims: Vector) -> bool:
    """left ≤ right in the quota dimensions where ``dims`` is non-zero
    (Volcano's ``LessEqualWithDimension``)."""
    mask = space.quota & (dims > 0)
    return bool((left[mask] <= right[mask] + EPS).all())


def short_names(space: ResourceSpace, left: Vector, right: Vector, dims: Vector) -> list[str]:
    """Names of the dimensions (where ``dims`` > 0) in which left exceeds right."""
    mask = space.quota & (dims > 0) & (left > right + EPS)
    return [space.names[i] for i in np.flatnonzero(mask)]


def overrun(
    space: ResourceSpace,
    terms: Sequence[tuple[Vector, str]],
    limit: Vector,
    what: str,
    names: Sequence[str] | None = None,
) -> str:
    """Where the sum of ``terms`` passes ``limit``, with the numbers, e.g. ``cpu 6 held + 2
    requested > 7 deserved``: in ``names``, else in the quota dimensions the last term (the
    request) asks for."""
    total = sum((v for v, _ in terms), space.zeros())
    if names is None:
        names = short_names(space, total, limit, terms[-1][0])
    parts = []
    for name in names:
        i = space.index[name]
        added = " + ".join(f"{format_resource(name, v[i])} {label}" for v, label in terms)
        parts.append(f"{name} {added} > {format_resource(name, limit[i])} {what}")
    return "; ".join(parts)


def share(space: ResourceSpace, allocated: Vector, deserved: Vector) -> float:
    """Dominant share: max over quota dimensions of allocated/deserved, where a zero deserved
    counts as share 1 if anything is allocated and 0 otherwise."""
    q = space.quota
    a, d = allocated[q], deserved[q]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(d > 0, a / np.where(d > 0, d, 1.0), np.where(a > 0, 1.0, 0.0))
    return float(ratios.max(initial=0.0))


class ShareMeter:
    """:func:`share` against a fixed denominator, precomputed for the hot path."""

    __slots__ = ("_any_zero", "_inv", "_zero")

    def __init__(self, space: ResourceSpace, denominator: Vector) -> None:
        q = space.quota
        pos = q & (denominator > 0)
        self._zero = q & ~(denominator > 0)
        self._any_zero = bool(self._zero.any())
        self._inv: Vector = np.where(pos, 1.0 / np.where(pos, denominator, 1.0), 0.0)
        """1/denominator on the quota columns with one, 0 elsewhere (their products are 0)."""

    def many(self, allocated: npt.NDArray[np.float64]) -> Vector:
        """:meth:`__call__` for each row of ``allocated``, in one pass."""
        best = (allocated * self._inv).max(axis=1, initial=0.0)
        best = np.where(best > 0.0, best, 0.0)
        if self._any_zero:
            spill = (allocated[:, self._zero] > 0).any(axis=1) & (best < 1.0)
            best = np.where(spill, 1.0, best)
        out: Vector = best
        return out

    def __call__(self, allocated: Vector) -> float:
        best = float((allocated * self._inv).max())
        if not best > 0.0:
            best = 0.0
        if best < 1.0 and self._any_zero and (allocated[self._zero] > 0).any():
            return 1.0
        return best
