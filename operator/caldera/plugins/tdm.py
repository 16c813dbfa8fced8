"""tdm: time-division multiplexing of revocable nodes between preemptable work and their owners.

Follows Volcano's ``tdm`` plugin (``pkg/scheduler/plugins/tdm/tdm.go``):

- A node labelled ``volcano.sh/revocable-zone: <zone>`` is revocable. Its zone is open during the
  window ``tdm.revocable-zone.<zone>: "HH:MM-HH:MM"`` (scheduler local time; a start at or after
  the end runs to the end time the next day, computed from today's date as Volcano does, so an
  overnight window is open from its start until midnight only). Outside the window, or for a
  zone with no window, the node takes no pod; inside it, only pods annotated
  ``volcano.sh/revocable-zone: "*"`` go there, and they score 100 there.
- Preemption: a preemptor that is itself preemptable, or may use revocable nodes, preempts
  nobody; others take preemptable Running tasks on ordinary (not revocable) nodes, per job no more
  than the job's disruption budget allows.
- Shuffle (``VictimTasks``): once per ``tdm.evict.period`` (default 1m), the preemptable Running
  tasks on revocable nodes whose zone is closed are evicted, per job within its budget (PodGroup
  annotation ``volcano.sh/jdb-min-available`` or ``volcano.sh/jdb-max-unavailable``, a number or a
  percentage; without either, one task per job per period).
- Jobs that are not preemptable (PodGroup ``volcano.sh/preemptable``, default false) go first; a
  job is pipelined once its waiting and ready tasks reach minAvailable; a job that is not
  preemptable and has pending tasks is starving (it may preempt).

The clock is the session's (``Session.now``): ``caldera simulate`` runs it from the manifests'
creation times, so a window test does not depend on the time of day.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar

import numpy as np
from pydantic import Field, field_validator, model_validator

from caldera.api.job import Job
from caldera.api.task import Task, TaskStatus
from caldera.framework.duration import parse_go_duration
from caldera.framework.interfaces import IntArray, Rejection, SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.framework.points import PERMIT, REJECT
from caldera.framework.scoring import NodeScorer
from caldera.models.policy import int_or_percent_of
from caldera.models.volcano import JDB_MAX_UNAVAILABLE, JDB_MIN_AVAILABLE, PREEMPTABLE_KEY

__all__ = ["REVOCABLE_ZONE", "TdmArgs", "TdmPlugin", "window"]

REVOCABLE_ZONE = "volcano.sh/revocable-zone"
"""The node label naming a node's zone; on a pod, ``"*"`` lets it use revocable nodes."""
ZONE_PREFIX = "tdm.revocable-zone."
MIN_AVAILABLE = JDB_MIN_AVAILABLE
MAX_UNAVAILABLE = JDB_MAX_UNAVAILABLE
MAX_NODE_SCORE = 100.0
_CLOCK = re.compile(r"([01]?[0-9]|2[0-3]):([0-5][0-9])")
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


def _clock(text: str) -> tuple[int, int]:
    match = _CLOCK.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a time of day (HH:MM)")
    return int(match[1]), int(match[2])


def window(raw: str, now: float) -> tuple[float, float]:
    """The window ``HH:MM-HH:MM`` of the day of ``now`` (local time), as Volcano's
    ``parseRevocableZone`` places it: an end at or before the start is the next day's."""
    parts = raw.strip().split("-")
    if len(parts) != 2:
        raise ValueError(f"revocable zone {raw} format error (a window is HH:MM-HH:MM)")
    (h1, m1), (h2, m2) = _clock(parts[0]), _clock(parts[1])
    today = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
    start = today.replace(hour=h1, minute=m1)
    end = today.replace(hour=h2, minute=m2)
    if (h1, m1) >= (h2, m2):
        end += timedelta(days=1)
    return start.timestamp(), end.timestamp()


class TdmArgs(Args):
    zones: dict[str, str] = Field(default_factory=dict)
    """Zone → ``HH:MM-HH:MM`` (``tdm.revocable-zone.<zone>``)."""
    evict_period: str = Field("1m", alias="tdm.evict.period")

    @model_validator(mode="before")
    @classmethod
    def _collect(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        zones = {k[len(ZONE_PREFIX) :]: v for k, v in data.items() if k.startswith(ZONE_PREFIX)}
        rest = {k: v for k, v in data.items() if not k.startswith(ZONE_PREFIX)}
        for zone, raw in zones.items():
            if not isinstance(raw, str):
                # pydantic turns a ValueError (not a TypeError) into the error naming the key
                raise ValueError(f"{ZONE_PREFIX}{zone}: must be a string HH:MM-HH:MM")  # noqa: TRY004
            try:
                window(raw, 0.0)
            except ValueError as exc:
                raise ValueError(f"{ZONE_PREFIX}{zone}: {exc}") from None
        return {**rest, "zones": zones} if zones else rest

    @field_validator("evict_period")
    @classmethod
    def _period(cls, value: str) -> str:
        if parse_go_duration(value) <= 0:
            raise ValueError("must be a positive duration, e.g. 1m")
        return value


def _revocable(task: Task) -> bool:
    """The pod may use revocable nodes (Volcano's ``GetPodRevocableZone``: only ``*``)."""
    return task.annotations.get(REVOCABLE_ZONE) == "*"


def job_preemptable(job: Job) -> bool:
    """The PodGroup's ``volcano.sh/preemptable`` (Volcano's ``extractPreemptable``)."""
    return job.annotations.get(PREEMPTABLE_KEY, "") in _TRUE


def _int_or_percent(raw: str, total: int) -> int:
    """Volcano's ``parseIntStr``: a value that is neither a count nor a percentage counts 0."""
    try:
        return int_or_percent_of(raw, total)
    except ValueError:
        return 0


def max_evictions(job: Job) -> int:
    """How many of the job's tasks may go now (Volcano's ``getMaxPodEvictNum``)."""
    running = job.count(TaskStatus.RUNNING)
    total = len(job.tasks)
    max_unavailable = job.annotations.get(MAX_UNAVAILABLE, "")
    min_available = job.annotations.get(MIN_AVAILABLE, "")
    if min_available:  # Volcano reads minAvailable first (extractBudget)
        floor = _int_or_percent(min_available, total)
        return running - floor if running >= floor else 1
    if max_unavailable:
        finished = job.count(TaskStatus.SUCCEEDED, TaskStatus.FAILED)
        unavailable = total - finished - running
        allowed = _int_or_percent(max_unavailable, total)
        return 0 if unavailable >= allowed else allowed - unavailable
    return 1


def _within_budget(ssn: SessionView, tasks: Sequence[Task]) -> list[Task]:
    """Per job, the first tasks its budget lets go (Volcano's ``maxVictims``)."""
    by_job: dict[str, list[Task]] = {}
    for task in tasks:
        by_job.setdefault(task.job, []).append(task)
    out: list[Task] = []
    for key, mine in by_job.items():
        job = ssn.jobs.get(key)
        if job is not None:
            out.extend(mine[: max(0, min(max_evictions(job), len(mine)))])
    return out


class TdmPlugin(Plugin[TdmArgs]):
    name: ClassVar[str] = "tdm"
    Args = TdmArgs

    def on_session_open(self, ssn: SessionView) -> None:
        nodes, now = ssn.nodes, ssn.now
        zone_of = nodes.label_column(REVOCABLE_ZONE)
        zones = sorted({z for z in zone_of if z is not None})
        revocable = np.array([z is not None for z in zone_of], dtype=bool)
        closed_reason: dict[str, str] = {}
        for zone in zones:
            raw = self.args.zones.get(zone)
            if raw is None:
                closed_reason[zone] = f"plugin tdm predicates revocable zone {zone} not support"
                continue
            start, end = window(raw, now)
            if not start <= now <= end:
                closed_reason[zone] = (
                    f"plugin tdm predicates current time beyond revocable zone {zone}:{raw}"
                )
        closed_masks = [(r, zone_of == z) for z, r in closed_reason.items()]
        open_nodes = revocable & ~np.isin(zone_of, list(closed_reason))
        scores = np.where(open_nodes, MAX_NODE_SCORE, 0.0)

        any_revocable, any_open = bool(revocable.any()), bool(open_nodes.any())

        def predicate(task: Task) -> list[Rejection]:
            if not any_revocable:
                return []
            out = list(closed_masks)
            if not _revocable(task) and any_open:
                msg = f"plugin tdm predicates task {task.key} is not allow to dispatch to "
                out.append((msg + "revocable node", open_nodes))
            return out

        def score(task: Task, rows: IntArray) -> Any:
            return scores[rows] if _revocable(task) else 0.0

        def preemptable(preemptor: Task, preemptees: Sequence[Task]) -> tuple[list[Task], int]:
            if preemptor.preemptable or _revocable(preemptor):
                return [], REJECT
            candidates = [
                t
                for t in preemptees
                if t.preemptable
                and t.status is TaskStatus.RUNNING
                and t.node >= 0
                and not revocable[t.node]
            ]
            return _within_budget(ssn, candidates), PERMIT

        memory: dict[str, float] = ssn.registry.memory.setdefault(self.name, {})
        period = parse_go_duration(self.args.evict_period)

        def victims(_: Sequence[Task]) -> list[Task]:
            if memory.get("last_evict", -math.inf) + period > now:
                return []
            memory["last_evict"] = now
            closed = [z for z in self.args.zones if z in closed_reason or z not in zones]
            if not closed:
                return []
            rows = np.flatnonzero(np.isin(zone_of, closed))
            tasks = [
                t
                for row in rows
                for t in nodes.tasks[row].values()
                if t.preemptable and t.status is TaskStatus.RUNNING
            ]
            return _within_budget(ssn, tasks)

        ssn.predicate_point.add(self.name, predicate)
        ssn.node_order_point.add(self.name, NodeScorer(score, local=True, variant=_revocable))
        ssn.preemptable_point.add(self.name, preemptable)
        ssn.victim_tasks_point.add(self.name, victims)
        ssn.job_order_point.add_key(self.name, job_preemptable)
        ssn.job_pipelined_point.add(
            self.name,
            lambda job: (
                PERMIT
                if job.waiting_task_num() + job.ready_task_num() >= job.min_available
                else REJECT
            ),
        )
        ssn.job_starving_point.add(
            self.name,
            lambda job: not job_preemptable(job) and job.count(TaskStatus.PENDING) > 0,
        )
