"""What a build makes of each pod, kept from one build to the next.

:class:`~caldera.cache.builder.Builder` classifies each pod version once (an :class:`Outcome` of
some :class:`Kind`); the resident model (:mod:`caldera.model.resident`) and the snapshot builder
(:mod:`caldera.cache.snapshot`) keep those outcomes, the pods of each job in order
(:class:`Members`) and the in-memory groups of bare pods (:class:`Group`) between builds.
"""

from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass

from caldera.cache.memo import Implicit
from caldera.models.core import Pod
from caldera.models.parse import ObjectError

__all__ = [
    "GONE",
    "HELD",
    "JOBLESS",
    "MEMBER",
    "NO_MEMBERS",
    "SKIP",
    "Group",
    "Kind",
    "Members",
    "Outcome",
]


class Kind(enum.Enum):
    """What a build makes of a pod."""

    GONE = "bound to a node that no longer exists"
    SKIP = "left out"
    HELD = "waits, and is told why"
    MEMBER = "a task of a job"
    JOBLESS = "holds room on its node, in no job of ours"

    __hash__ = object.__hash__


GONE, SKIP, HELD, MEMBER, JOBLESS = Kind


@dataclass(slots=True, eq=False)
class Outcome:
    """What a build made of one pod version, kept for the next build: valid while the build's
    ``context`` (everything else the answer read) is the same object and, for a bare pod, while
    its group is described by the same pod (``joins`` says whether one before it did). Never
    changed once made (not frozen: a frozen dataclass costs ten times as much to make)."""

    context: object
    kind: Kind
    job_key: str
    why: str
    problems: tuple[ObjectError, ...]
    row: int
    """The node row it holds room on (-1: none on a Ready node)."""
    uid: str
    group: str
    """A bare pod's in-memory group ("" for other pods)."""
    joins: bool
    first: Group | None
    """The group this pod describes as its first pod."""


class Members:
    """The pods of one job, in pod order."""

    __slots__ = ("keys", "pods")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.pods: list[Pod] = []

    def insert(self, key: str, pod: Pod) -> None:
        """Add pod ``key`` in its place in pod order."""
        i = bisect.bisect_left(self.keys, key)
        self.keys.insert(i, key)
        self.pods.insert(i, pod)

    def remove(self, key: str) -> None:
        """Take pod ``key`` out (nothing if it is not a member)."""
        i = bisect.bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            del self.keys[i]
            del self.pods[i]


NO_MEMBERS = Members()


@dataclass(slots=True, eq=False)
class Group:
    """An in-memory group of bare pods as its first pod describes it (one object per group
    while it stays the same: equal only to itself; never changed once made)."""

    group: Implicit
    min_member: int
    queue: str
    priority: int
    namespace: str
    creation: float
    workload: bool = False
    """A Kubernetes PodGroup (``scheduling.k8s.io``) rather than bare pods."""
    foreign: bool = False
    """Bare pods another instance placed (a peer's, or another replica's in a hash split):
    counted for their queue, never placed here."""
