"""The consistent-hash ring Volcano's multi-scheduler mode splits jobs and nodes with.

Volcano (``pkg/scheduler/cache/util.go``: ``getMultiSchedulerInfo``, ``responsibleForPod``,
``responsibleForNode``, ``responsibleForPodGroup``) puts the StatefulSet's scheduler pods
``<base>-0`` … ``<base>-<N-1>`` on a ring of ``stathat.com/c/consistent`` v1.0.0 (the version its
``go.mod`` pins) and gives each key to the member that ``Get`` returns. That library, as this
module follows it:

- ``New``: 20 points per member (``NumberOfReplicas``);
- ``Add``: point ``i`` of member ``m`` is ``crc32.ChecksumIEEE(strconv.Itoa(i) + m)``
  (``eltKey``; later versions of the library changed it to ``m + "|" + i``, which Volcano does
  not use); a point another member already holds is taken over by the later ``Add``;
- ``Get(key)``: the member of the first point strictly above ``crc32.ChecksumIEEE(key)``
  (``search``), wrapping to the lowest point.

Every instance builds the same ring from the same names, so each key has one owner without the
instances talking to each other.
"""

from __future__ import annotations

import bisect
import zlib
from collections.abc import Sequence

__all__ = ["REPLICAS", "HashRing", "statefulset_members"]

REPLICAS = 20
"""``consistent.New``'s ``NumberOfReplicas``."""


class HashRing:
    """``consistent.Consistent`` with ``members`` added in order."""

    __slots__ = ("_hashes", "_owner")

    def __init__(self, members: Sequence[str]) -> None:
        circle: dict[int, str] = {}
        for member in members:
            for i in range(REPLICAS):
                circle[zlib.crc32(f"{i}{member}".encode())] = member
        self._hashes = sorted(circle)
        self._owner = [circle[h] for h in self._hashes]

    def get(self, key: str) -> str:
        """The member responsible for ``key``; "" on an empty ring (Go's ``ErrEmptyCircle``)."""
        if not self._hashes:
            return ""
        i = bisect.bisect_right(self._hashes, zlib.crc32(key.encode()))
        return self._owner[i if i < len(self._hashes) else 0]


def statefulset_members(pod_name: str, count: int) -> list[str]:
    """``getMultiSchedulerInfo``: the StatefulSet's pod names, from this pod's name (all before
    its last ``-``) and the number of schedulers."""
    base = pod_name[: pod_name.rfind("-")]
    return [f"{base}-{i}" for i in range(count)]
