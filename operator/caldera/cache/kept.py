"""Jobs kept from one snapshot to the next while nothing about them changed.

Most jobs of a busy cluster are running and stay as they are for many sessions: the same
PodGroup (or bare pod) object, the same pod objects, nothing placed or evicted. Building such a
job again (the job, a task per pod, the task indexes, the running sums) is what made every
snapshot cost microseconds per pod. A build hands each job's inputs to :class:`KeptJobs`, which
returns the job of the last build when:

- what the job is made of is the same objects: the PodGroup (or, for the in-memory group of bare
  pods, its size, queue and first pod) and every member pod, in order;
- nothing outside those objects that the job reads has changed (the resource space, the node
  table's rows, the priority classes, the default queue: :attr:`KeptJobs.world`);
- the session that used it changed none of its tasks (:attr:`Job.touched`, set by every task
  state change, which is also the only way a session moves, binds or evicts a task).

A kept job gets back the fields a session writes outside its tasks (phase, conditions, the fit
errors, the topology trace); anything else is built again. The result is the snapshot a fresh
build gives, which a test checks on random change streams with a session run between builds.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from caldera.api.job import Job
from caldera.models.core import Pod
from caldera.models.volcano import PodGroupCondition

__all__ = ["KeptJobs", "same_objects", "same_parts"]


def same_parts(old: Sequence[object], new: Sequence[object]) -> bool:
    """Element by element, each the same object or equal."""
    return len(old) == len(new) and all(a is b or a == b for a, b in zip(old, new, strict=True))


def same_objects(old: Mapping[str, object], new: Mapping[str, object]) -> bool:
    """The same keys, each holding the same object or an equal one (the watched objects are
    replaced, never changed, so identity says nothing changed; an equal new version derives
    the same too). Dictionaries compare in C, identity first: at 5,000 nodes this is tens of
    microseconds, where a Python loop over them took milliseconds every session."""
    if isinstance(old, dict) and isinstance(new, dict):
        return old == new
    return len(old) == len(new) and all(old.get(k) is v for k, v in new.items())


@dataclass(slots=True)
class _Kept:
    job: Job
    source: Hashable
    """What the job's own fields come from (compared by equality, objects by identity)."""
    members: list[Pod]


class KeptJobs:
    __slots__ = ("_jobs", "_world", "reused")

    def __init__(self) -> None:
        self._jobs: dict[str, _Kept] = {}
        self._world: tuple[object, ...] = ()
        self.reused = 0
        """Jobs the last build took over unchanged (for tests and profiles)."""

    def start(self, world: tuple[object, ...]) -> None:
        """Begin a build; every kept job is dropped when ``world`` (what jobs read besides their
        own objects, compared element by element by identity or equality) differs."""
        if not same_parts(self._world, world):
            self._jobs.clear()
        self._world = world
        self.reused = 0

    def take(
        self,
        key: str,
        source: Hashable,
        members: list[Pod],
        phase: str,
        conditions: Sequence[PodGroupCondition],
    ) -> Job | None:
        """The kept job ``key`` if it is still the job of ``source`` and ``members``, with the
        fields a session writes reset (``phase`` and ``conditions`` as the object says); None
        when it must be made anew (then :meth:`keep` it)."""
        kept = self._jobs.get(key)
        if kept is None:
            return None
        job = kept.job
        # list equality looks at identity first: the same pod objects compare at C speed (a
        # new object equal in every field makes the same tasks, so it may pass too)
        if (
            job.touched
            or kept.members != members
            or not (kept.source is source or kept.source == source)
        ):
            return None
        job.phase = phase
        if job.conditions or conditions:
            job.conditions = list(conditions)
        job.fit_error = ""
        if job.nodes_fit_errors:
            job.nodes_fit_errors = {}
        job.topology_trace = None
        job.settled = job.at_open = None  # sorted out again when a session opens on it
        self.reused += 1
        return job

    def keep(self, key: str, source: Hashable, members: list[Pod], job: Job) -> None:
        self._jobs[key] = _Kept(job, source, list(members))  # the caller may change its list

    def drop(self, key: str) -> None:
        self._jobs.pop(key, None)

    def keep_only(self, keys: set[str] | dict[str, Job]) -> None:
        for gone in self._jobs.keys() - keys:
            del self._jobs[gone]
