"""The resource axis shared by every vector in one snapshot.

A snapshot fixes the set of resource names once (cpu, memory and pods first, then every other name
seen on nodes or pods, sorted), so requests, capacities and shares are small float64 vectors and
node state is an (nodes × resources) matrix. Units are engine units from :mod:`caldera.quantity`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from caldera.quantity import format_resource

__all__ = ["CPU", "CPU_MEMORY", "MEMORY", "PODS", "ResourceSpace", "Vector", "counts_as_resource"]

Vector = npt.NDArray[np.float64]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
_FIXED = (CPU, MEMORY, PODS)
CPU_MEMORY = slice(0, 2)
"""The cpu and memory columns of every space (they always come first): a slice, so picking them
out of a node matrix costs no index array."""


_NATIVE = frozenset({CPU, MEMORY, PODS, "ephemeral-storage"})
_QUALIFIED_PART = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def counts_as_resource(name: str) -> bool:
    """Whether a name in a PodGroup's ``minResources`` or a Queue's resource lists is a resource
    the scheduler accounts, as Volcano's ``NewResource`` decides: cpu, memory, pods,
    ephemeral-storage, and the scalar names of Kubernetes' ``IsScalarResourceName`` (extended
    resources such as ``nvidia.com/gpu``, ``hugepages-*``, ``kubernetes.io/`` prefixed and
    ``attachable-volumes-*`` names). Quota spellings (``requests.cpu``, ``limits.memory``,
    ``count/pods``), which Volcano's controllers write into minResources, are not: only the
    resourcequota plugin reads them."""
    if name in _NATIVE or name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    if "kubernetes.io/" in name:
        return True
    if "/" not in name or name.startswith(("requests.", "count/")):
        return False
    # IsExtendedResourceName: "requests." + name must be a qualified name (prefix/name)
    prefix, _, short = f"requests.{name}".partition("/")
    return (
        len(prefix) <= 253
        and _DNS_SUBDOMAIN.fullmatch(prefix) is not None
        and len(short) <= 63
        and _QUALIFIED_PART.fullmatch(short) is not None
    )


class ResourceSpace:
    """An ordered, immutable set of resource names with vector helpers."""

    __slots__ = ("fitted", "index", "names", "quota", "unfitted")

    def __init__(self, extra: Iterable[str] = (), unfitted: Iterable[str] = ()) -> None:
        others = sorted({name for name in extra if name not in _FIXED})
        self.names: tuple[str, ...] = (*_FIXED, *others)
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self.quota: npt.NDArray[np.bool_] = np.array([n != PODS for n in self.names], dtype=bool)
        """Columns that count for shares and quotas (all but the implicit pod slot)."""
        self.unfitted: frozenset[str] = frozenset(unfitted) & frozenset(self.names)
        """Resources queues count but nodes are not checked for: a plugin places them (a
        shared device's count, whose cards deviceshare walks)."""
        self.fitted: npt.NDArray[np.bool_] | None = (
            np.array([n not in self.unfitted for n in self.names], dtype=bool)
            if self.unfitted
            else None
        )
        """Columns the node fit checks (None: all)."""

    def fit_columns(self, req: Vector) -> npt.NDArray[np.intp]:
        """The columns of ``req`` a node must have room for: the non-zero ones, but the
        :attr:`unfitted`."""
        if self.fitted is None:
            return np.flatnonzero(req)
        return np.flatnonzero(np.where(self.fitted, req, 0.0))

    def __len__(self) -> int:
        return len(self.names)

    def zeros(self) -> Vector:
        return np.zeros(len(self.names), dtype=np.float64)

    def vector(self, values: Mapping[str, float], *, missing: float = 0.0) -> Vector:
        """A vector from a name→value map; names outside the space are ignored (their owner cannot
        be satisfied by any node anyway, see :meth:`unknown`)."""
        n = len(self.names)
        # np.zeros is a single C call; np.full is Python code around two (a tenth of the cost)
        vec = np.zeros(n, dtype=np.float64) if missing == 0.0 else np.full(n, missing)
        for name, value in values.items():
            i = self.index.get(name)
            if i is not None:
                vec[i] = value
        return vec

    def unknown(self, values: Mapping[str, float]) -> list[str]:
        return sorted(name for name, value in values.items() if value and name not in self.index)

    def to_dict(self, vec: Vector, *, skip_zero: bool = False) -> dict[str, float]:
        return {
            name: float(vec[i])
            for i, name in enumerate(self.names)
            if not (skip_zero and vec[i] == 0)
        }

    def to_quantities(self, vec: Vector) -> dict[str, str]:
        """Render a vector as a Kubernetes ResourceList: cpu and memory always, other resources
        when non-zero; the implicit ``pods`` slot is not a quantity users request, so it is left
        out (as Volcano does)."""
        out: dict[str, str] = {}
        for i, name in enumerate(self.names):
            if name == PODS or (name not in (CPU, MEMORY) and vec[i] == 0):
                continue
            out[name] = format_resource(name, float(vec[i]))
        return out

    def describe(self, vec: Vector) -> str:
        parts = [f"{k}: {v}" for k, v in self.to_quantities(vec).items()]
        return ", ".join(parts)
