"""The model kept between sessions, and the snapshot it hands each one.

:class:`Model` builds from nothing (:func:`~caldera.cache.snapshot.build_with_parts`) the first
time, every ``full_rebuild_every`` sessions (if set) and whenever something every pod or job
reads changed (the build's world and context tokens: the nodes, the resource space, the queue
names, the priority classes, Kubernetes PodGroups, invalid objects...). Otherwise it visits only:

- the pods that changed (the watch's news, the binds in flight and the pods being evicted or
  lifted, this session's and the last's) and the pods that name a PodGroup that was added,
  changed or deleted: each is classified again, as the build would, and taken out of and put
  into the jobs, the waiting and gone lists and the node accounting;
- the in-memory groups those pods belong to, all of whose members are classified again in pod
  order (the first pod describes the group);
- the jobs those pods belong to, the active jobs (a session may have changed them; taking one
  over resets what the session wrote) and the settled jobs the last session woke.

The result equals a fresh build's snapshot (a differential test drives both through random
change streams, with sessions between); the jobs' order in ``jobs`` differs (every consumer
orders them itself).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from caldera.api.job import Job
from caldera.api.jobtable import SettledJobs, is_settled, partition, unsettle
from caldera.api.snapshot import Snapshot
from caldera.api.task import Task
from caldera.cache.groups import group_ref
from caldera.cache.kept import same_parts
from caldera.cache.memo import BuildMemo
from caldera.cache.outcome import (
    GONE,
    HELD,
    JOBLESS,
    MEMBER,
    NO_MEMBERS,
    Group,
    Members,
    Outcome,
)
from caldera.cache.snapshot import (
    Prelude,
    build_with_parts,
    claim_statuses_of,
    finish,
    prelude,
    prepare_pods,
    report_gone,
    set_implicit_phase,
)
from caldera.cache.state import ClusterState
from caldera.cache.topology import assign_subgroups
from caldera.model.accounts import Accounts
from caldera.models.core import Pod
from caldera.models.parse import ObjectError
from caldera.models.volcano import PodGroup
from caldera.sharding.scope import WHOLE_CLUSTER, Scope

__all__ = ["FULL_REBUILD_EVERY", "Model"]

FULL_REBUILD_EVERY = 0
"""Sessions between builds of the model from nothing, as a check (0: none but those a change of
nodes, queues, priority classes or resource names makes). Off by default: at 50,000 pods a build
from nothing takes seconds, during which nothing is decided; every 1,000 sessions (about every
25 s at 100 pods/s) it put a p99 of 2.8 s on a steady flow."""


@dataclass(slots=True, eq=False)
class _Kept:
    """What the last build made, kept up to date."""

    world: tuple[object, ...]
    context: object
    known: dict[str, PodGroup | Group]
    """Every job's spec: its PodGroup, or the group its first pod or Kubernetes PodGroup
    describes."""
    implicit: set[str]
    """The jobs of in-memory groups of bare pods (their spec comes from their pods)."""
    others: set[str]
    """The other jobs: of PodGroups and Kubernetes PodGroups."""
    members: dict[str, Members]
    jobs: dict[str, Job]
    active: dict[str, Job]
    settled: SettledJobs
    held: dict[str, str]
    gone: dict[str, str]
    jobless: dict[str, Task]
    problems: dict[str, tuple[ObjectError, ...]]
    """Pod key → the problems its outcome reports (only pods with some)."""
    claims: dict[str, dict[str, str | None]]
    accounts: Accounts
    podgroups: dict[str, PodGroup]
    """The PodGroups as the last session saw them."""
    refs: dict[str, set[str]]
    """PodGroup key → the pods that name it (whether it exists or not)."""
    ref_of: dict[str, str]
    """Pod → the PodGroup it names."""
    strays: dict[str, set[str]]
    """In-memory group → its bare pods that are not its members (one that could not describe
    it while it was the first may join once another pod does)."""


class Model:
    """The scheduler's model of the cluster in the session process (see the package)."""

    def __init__(
        self,
        *,
        scheduler_names: Iterable[str],
        default_queue: str,
        bare_pods_in_memory: bool,
        full_rebuild_every: int = FULL_REBUILD_EVERY,
        scope: Scope = WHOLE_CLUSTER,
    ) -> None:
        self.scheduler_names = frozenset(scheduler_names)
        self.scope = scope
        """This instance's share of the cluster (:mod:`caldera.sharding.scope`)."""
        self.default_queue = default_queue
        self.bare_pods_in_memory = bare_pods_in_memory
        self.full_rebuild_every = full_rebuild_every
        self.memo = BuildMemo()
        self.sessions = 0
        self.last_build = ""
        """"full" or "changes": how the last snapshot was made (for tests and logs)."""
        self._kept: _Kept | None = None
        self._overlay: frozenset[str] = frozenset()
        self._managed: frozenset[str] | None = None

    def snapshot(
        self,
        state: ClusterState,
        *,
        now: float,
        session_id: str,
        managed_resources: frozenset[str] = frozenset(),
        changed: Collection[str] | None = None,
        overlay: Collection[str] = (),
    ) -> tuple[Snapshot, list[ObjectError]]:
        """The snapshot of ``state`` for one session.

        ``changed``: the pods that may differ from the last call's ``state`` (None: not known,
        every pod is compared). ``overlay``: the pods whose object in ``state`` is this
        session's own copy (binds in flight, evictions, lifted gates)."""
        self.sessions += 1
        every = self.full_rebuild_every
        if every and self.sessions % every == 0:
            self.memo, self._kept = BuildMemo(), None
        overlay = frozenset(overlay)
        kept = self._kept
        out = None
        if kept is not None and managed_resources == self._managed:
            if changed is None:
                entries = self.memo.entries
                pods = state.pods
                changed = {k for k, e in entries.items() if pods.get(k) is not e.pod}
                changed.update(k for k in pods if k not in entries)
            out = self._changes(kept, state, {*changed, *overlay, *self._overlay})
        self._overlay = overlay
        self._managed = managed_resources
        if out is None:
            out = self._full(state, managed_resources)
        assert self._kept is not None
        self._kept.podgroups = dict(state.podgroups)
        snapshot, problems = out
        snapshot.now, snapshot.session_id = now, session_id
        return snapshot, problems

    def prepare(
        self, state: ClusterState, pods: Mapping[str, Pod], managed_resources: frozenset[str]
    ) -> None:
        """Make ahead, in the memo, what a build makes of each of ``pods`` alone (``state``
        gives the resource names of the nodes, PodGroups and queues): while the pods are still
        being listed, so the first build finds it made."""
        grouped = (
            self.scheduler_names | self.scope.peers if self.bare_pods_in_memory else frozenset()
        )
        prepare_pods(state, pods, self.memo, managed_resources, grouped)

    # -- from nothing -------------------------------------------------------------------------

    def _full(
        self, state: ClusterState, managed: frozenset[str]
    ) -> tuple[Snapshot, list[ObjectError]]:
        self.last_build = "full"
        if self._kept is not None:  # outcomes are kept whatever their PodGroup says
            for key in self._named_by_changed_podgroups(self._kept, state):
                entry = self.memo.entries.get(key)
                if entry is not None:
                    entry.outcome = None
        snapshot, problems, parts = build_with_parts(
            state,
            scheduler_names=self.scheduler_names,
            now=0.0,
            session_id="",
            default_queue=self.default_queue,
            memo=self.memo,
            bare_pods_in_memory=self.bare_pods_in_memory,
            managed_resources=managed,
            podgroups_in_context=False,
            scope=self.scope,
        )
        pre = parts.pre
        refs = {ref: set(keys) for ref, keys in parts.refs.items()}
        ref_of = {key: ref for ref, keys in parts.refs.items() for key in keys}
        strays: dict[str, set[str]] = {}
        for key, entry in self.memo.entries.items():
            if isinstance(out := entry.outcome, Outcome) and out.group and out.kind is not MEMBER:
                strays.setdefault(out.group, set()).add(key)
        active, settled = partition(pre.space, snapshot.jobs)
        implicit = {k for k, g in pre.known.items() if isinstance(g, Group) and not g.workload}
        self._kept = _Kept(
            world=pre.world,
            context=pre.context,
            known=dict(pre.known),
            implicit=implicit,
            others=set(pre.known) - implicit,
            members=parts.members,
            jobs=snapshot.jobs,
            active=active,
            settled=settled,
            held=parts.held,
            gone=parts.gone,
            jobless=parts.jobless,
            problems={
                key: out.problems
                for key, entry in self.memo.entries.items()
                if isinstance(out := entry.outcome, Outcome) and out.problems
            },
            claims=dict(parts.claims),
            accounts=Accounts(snapshot.nodes),
            podgroups=dict(state.podgroups),
            refs=refs,
            strays=strays,
            ref_of=ref_of,
        )
        snapshot.active, snapshot.settled = dict(active), settled
        return snapshot, problems

    # -- what changed -------------------------------------------------------------------------

    def _changes(
        self, kept: _Kept, state: ClusterState, changed: set[str]
    ) -> tuple[Snapshot, list[ObjectError]] | None:
        """The snapshot made from ``kept`` and the pods in ``changed``; None when something
        every pod or job reads changed (then build from nothing)."""
        memo = self.memo
        entries = memo.entries
        before: dict[str, Outcome] = {}
        named = self._named_by_changed_podgroups(kept, state)
        changed |= named
        for key in changed:
            entry = entries.get(key)
            if entry is not None and isinstance(entry.outcome, Outcome):
                before[key] = entry.outcome
            pod = state.pods.get(key)
            if pod is None:
                memo.forget(key)
            else:
                memo.entry(key, pod)
        for key in named & entries.keys():
            entries[key].outcome = None  # what its PodGroup says changed
        pre = prelude(
            state,
            self.scheduler_names,
            self.default_queue,
            memo,
            self.bare_pods_in_memory,
            self._managed or frozenset(),
            podgroups_in_context=False,
            scope=self.scope,
        )
        if pre.context is not kept.context or not same_parts(kept.world, pre.world):
            return None
        self.last_build = "changes"
        kept.accounts.reallocate(pre.table.allocatable)  # a node changed in place, maybe
        renamed: set[str] = set()
        """Groups whose naming pods changed: whose they are may have changed (a pod of another
        scheduler that waits is in no job, yet makes its group another's)."""
        for key in changed:
            old_ref = kept.ref_of.pop(key, "")
            if old_ref:
                renamed.add(old_ref)
                kept.refs[old_ref].discard(key)
                if not kept.refs[old_ref]:
                    del kept.refs[old_ref]
            pod = state.pods.get(key)
            if pod is not None and (ref := group_ref(pod)):
                renamed.add(ref)
                kept.ref_of[key] = ref
                kept.refs.setdefault(ref, set()).add(key)
        b = pre.builder
        known = kept.known
        affected: set[str] = set()
        # jobs whose spec is new: a PodGroup added or changed (its pods were invalidated above),
        # a Kubernetes PodGroup's group that follows its namespace's queue annotation
        for key, spec in pre.known.items():
            if known.get(key) is not spec:
                known[key] = spec
                affected.add(key)
        for key in kept.others - pre.known.keys():
            del known[key]
            affected.add(key)
        kept.others = set(pre.known)
        pre.known = known
        affected.update(renamed & known.keys())
        prelude_problems = list(b.problems)
        for key, out in before.items():
            self._take_out(kept, key, out, affected)
        present = sorted(k for k in changed if k in state.pods)
        outcomes = {key: self._outcome(pre, key) for key in present}
        # an in-memory group any changed pod was or is in: all its pods again, in pod order
        firsts = {o.job_key for o in outcomes.values() if o.first is not None}
        replay = {
            o.group
            for o in [*before.values(), *outcomes.values()]
            if o.group and (o.group in kept.implicit or o.group in firsts)
        }
        changed_in: dict[str, set[str]] = {}  # group → its changed pods (a pod keeps its group)
        for key, out in outcomes.items():
            if out.group in replay:
                changed_in.setdefault(out.group, set()).add(key)
        for group in sorted(replay):
            kept.implicit.discard(group)
            known.pop(group, None)
            old = kept.members.pop(group, None)
            members = set(old.keys if old is not None else ())
            members.update(kept.strays.get(group, ()))
            for key in members - changed:
                last = entries[key].outcome
                assert isinstance(last, Outcome)  # in the group: its outcome put it there
                self._take_out(kept, key, last, affected)
            members.update(changed_in.get(group, ()))
            for key in sorted(members):
                outcomes[key] = self._outcome(pre, key)
            affected.add(group)
        for key in sorted(outcomes):
            self._put_in(kept, pre, key, outcomes[key], affected)
        affected.update(kept.active)
        affected.update(job.uid for job in kept.settled.woken)
        kept.settled.woken.clear()
        for key in sorted(affected):
            self._job(kept, pre, key)
        b.problems[:] = prelude_problems
        for key in sorted(kept.problems):
            b.problems.extend(kept.problems[key])
        report_gone(b, kept.gone)
        kept.accounts.fill(pre.table)
        snapshot = finish(state, pre, kept.jobs, kept.held, dict(kept.claims))
        snapshot.active, snapshot.settled = dict(kept.active), kept.settled
        return snapshot, b.problems

    @staticmethod
    def _named_by_changed_podgroups(kept: _Kept, state: ClusterState) -> set[str]:
        """The pods that name a PodGroup added, changed or deleted since the last session."""
        old, new = kept.podgroups, state.podgroups
        if old == new:  # compared in C, identity first
            return set()
        out: set[str] = set()
        for key in old.keys() | new.keys():
            if old.get(key) is not new.get(key):
                out.update(kept.refs.get(key, ()))
        return out

    def _outcome(self, pre: Prelude, key: str) -> Outcome:
        """What the build makes of pod ``key`` now (its last outcome while still valid)."""
        entry = self.memo.entries[key]
        out = pre.kept_outcome(entry)
        if out is None:
            out = entry.outcome = pre.builder.classify(
                key, entry, pre.known, pre.queues, pre.prio, pre.context, pre.vendors
            )
        if out.first is not None:
            pre.known[out.job_key] = out.first
        return out

    @staticmethod
    def _take_out(kept: _Kept, key: str, out: Outcome, affected: set[str]) -> None:
        """Forget what pod ``key`` gave the model with outcome ``out``."""
        if out.group and out.kind is not MEMBER and (strays := kept.strays.get(out.group)):
            strays.discard(key)
            if not strays:
                del kept.strays[out.group]
        kept.gone.pop(key, None)
        kept.held.pop(key, None)
        kept.problems.pop(key, None)
        kept.claims.pop(key, None)
        if out.kind is MEMBER and out.job_key:
            members = kept.members.get(out.job_key)
            if members is not None:
                members.remove(key)
            affected.add(out.job_key)
        elif out.kind is JOBLESS:
            task = kept.jobless.pop(key, None)
            if task is not None:
                kept.accounts.take_out(task)

    def _put_in(
        self, kept: _Kept, pre: Prelude, key: str, out: Outcome, affected: set[str]
    ) -> None:
        """Add what pod ``key`` gives the model with outcome ``out``."""
        pod = pre.builder.state.pods[key]
        if out.group and out.kind is not MEMBER:
            kept.strays.setdefault(out.group, set()).add(key)
        if out.problems:
            kept.problems[key] = out.problems
        if pod.status.resource_claim_statuses:
            kept.claims[key] = claim_statuses_of(pod)
        kind = out.kind
        if kind is GONE:
            kept.gone[key] = pod.spec.node_name
        elif kind is HELD:
            kept.held[key] = out.why
        elif kind is MEMBER:
            job_key = out.job_key
            if out.first is not None:
                kept.implicit.add(job_key)
            members = kept.members.get(job_key)
            if members is None:
                members = kept.members[job_key] = Members()
            members.insert(key, pod)
            affected.add(job_key)
        elif kind is JOBLESS:
            task = kept.jobless[key] = pre.builder.task(pre.space, key, pod, "", pre.prio)
            if out.row >= 0:
                task.node = out.row
                kept.accounts.put_in(out.row, task)

    def _job(self, kept: _Kept, pre: Prelude, key: str) -> None:
        """Make job ``key`` again from its spec and members (taken over when unchanged)."""
        old = kept.jobs.get(key)
        spec = pre.known.get(key)
        members = kept.members.get(key, NO_MEMBERS)
        job = (
            None
            if spec is None
            else pre.builder.kept_job(
                pre.space, key, spec, members, pre.prio, kept.refs.get(key, ())
            )
        )
        if old is not None:
            if key in kept.settled:
                kept.settled.remove(old)
            kept.active.pop(key, None)
            if old is not job:
                for task in old.tasks.values():
                    kept.accounts.take_out(task)
        if job is None:
            kept.jobs.pop(key, None)
            kept.members.pop(key, None)
            kept.implicit.discard(key)
            self.memo.kept.drop(key)
            return
        kept.jobs[key] = job
        if job is not old:
            entries = self.memo.entries
            for pod_key in members.keys:
                out = entries[pod_key].outcome
                assert isinstance(out, Outcome)
                if out.row >= 0:
                    task = job.tasks[out.uid]
                    task.node = out.row
                    kept.accounts.put_in(out.row, task)
        if isinstance(spec, Group):
            set_implicit_phase(job)
        else:
            pg = pre.builder.state.podgroups.get(key)
            if pg is not None and pg.spec.sub_group_policy:
                assign_subgroups(job, pg)
        if is_settled(job):
            kept.settled.add(job)
        else:
            kept.active[key] = job
            unsettle(job)
