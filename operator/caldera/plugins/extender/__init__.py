"""extender: Volcano's HTTP extender protocol, so a team's own service can filter and score
nodes, choose victims, and vote on jobs and queues.

Follows Volcano's ``pkg/scheduler/plugins/extender`` (``extenderPlugin.OnSessionOpen``,
``OnSessionClose``, ``send``, ``IsInterested``; bodies from ``argument.go``, rendered by
:mod:`.wire`). Each hook with a verb is a POST of JSON to ``<urlPrefix>/<verb>``; only an HTTP 200
answer counts, read up to 10 MiB, within ``extender.httpTimeout`` (1 s). A policy may list several
``extender`` entries, each its own server.

How often it is asked, per session: ``onSessionOpen`` and ``onSessionClose`` once;
``prioritize`` once per task placed, with every candidate node in one call; ``predicate`` per
(task, node), as Volcano's body holds one node, but only about nodes every other filter passed,
best score first, until one passes (usually one call per task; only a refusal with ``code: 2``,
Unschedulable, leaves the node to preemption: any other, a failed call included, keeps preemption
off it, as Volcano's ``PredicateForPreemptAction``); ``preemptable``/``reclaimable``
once per victim set considered; ``jobEnqueueable``/``jobReady`` per job asked about;
``queueOverused`` per queue asked about; ``allocateFunc``/``deallocateFunc`` per placement made
or undone. With ``extender.managedResources`` set, only tasks whose containers or init
containers request or limit one of those resources are asked about (a job: if any of its tasks
is).

When a call fails (unreachable, timed out, not HTTP 200, too large, not the expected JSON):

- ``ignorable: true``: the extender is skipped for that question (no node refused, no score,
  no vote);
- ``ignorable: false``: the decision it was asked about fails with the error as its reason: the
  node is refused, the task is not placed this session (prioritize), its victims are refused,
  the job is not enqueued or not ready, the queue counts as overused.

An extender that cannot be reached (no connection, or no answer in time) is not asked again in
the same session: every later question gets the same failure at once, so one dead extender costs
a session one timeout, not one per task. The first failure and the recovery are logged once
per extender (not per call).

Departures from Volcano, for what an SRE would expect: Volcano drops a non-ignorable extender
for the whole session when ``onSessionOpen`` fails (its hooks are then simply not called), and an
ignorable one that fails votes Permit (vetoing every victim of its tier) or reports a job as not
ready; here both follow the two rules above.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import orjson

from caldera.api.job import Job
from caldera.api.queue import Queue
from caldera.api.task import Task
from caldera.framework.interfaces import EventHandler, IntArray, SessionView
from caldera.framework.outside import CallError, DecisionFailed, Unreachable
from caldera.framework.placement import Curable
from caldera.framework.plugin import Plugin
from caldera.framework.points import ABSTAIN, REJECT
from caldera.framework.scoring import NodeScorer
from caldera.plugins.extender.args import ExtenderArgs
from caldera.plugins.extender.wire import Wire, body

__all__ = ["ExtenderArgs", "ExtenderPlugin"]

log = logging.getLogger(__name__)

UNSCHEDULABLE = 2
"""Volcano's status code ``Unschedulable``: the one refusal evicting pods may cure (a message
with code 0 counts as ``Error``: ``extenderPlugin.OnSessionOpen``'s predicate)."""


class ExtenderPlugin(Plugin[ExtenderArgs]):
    name: ClassVar[str] = "extender"
    Args = ExtenderArgs
    repeatable: ClassVar[bool] = True

    def on_session_open(self, ssn: SessionView) -> None:
        args = self.args
        self.ssn = ssn
        self.key = self.option.key
        self.wire = Wire(ssn)
        self.down: str | None = None
        """Why this extender is not asked again this session (it could not be reached)."""
        self.failed: str | None = None
        """The first failure of this session (logged once it is new)."""
        self.answered = False
        self._interest: dict[str, bool] = {}
        self._told: set[str] = set()
        self.calls = ssn.result.calls
        if args.verb("onSessionOpen"):
            try:
                self._call("onSessionOpen", body(**self.wire.session()))
            except CallError as exc:
                if not args.ignorable:  # every question it would have answered fails
                    self.down = str(exc)
        for hook, register in self._registrations().items():
            if args.verb(hook):
                register()
        if args.verb("allocateFunc") or args.verb("deallocateFunc"):
            ssn.event_handlers.add(self.key, self._handler())

    def on_session_close(self, ssn: SessionView) -> None:
        if self.args.verb("onSessionClose"):
            with contextlib.suppress(CallError):  # said once, by _health
                self._call("onSessionClose", b"{}")
        self._health()

    def _registrations(self) -> dict[str, Callable[[], None]]:
        ssn, key = self.ssn, self.key
        return {
            "predicate": lambda: ssn.node_check_point.add(key, self._predicate),
            "prioritize": lambda: ssn.node_order_point.add(key, NodeScorer(self._prioritize)),
            "preemptable": lambda: ssn.preemptable_point.add(key, self._victims("preemptable")),
            "reclaimable": lambda: ssn.reclaimable_point.add(key, self._victims("reclaimable")),
            "jobEnqueueable": lambda: ssn.job_enqueueable_point.add(key, self._enqueueable),
            "queueOverused": lambda: ssn.overused_point.add(key, self._overused),
            "jobReady": lambda: ssn.job_ready_point.add(key, self._ready),
        }

    # -- calls -------------------------------------------------------------------------------

    def _call(self, hook: str, payload: bytes) -> Any:
        """POST ``payload`` to the hook's verb; the decoded answer. Raises CallError."""
        args = self.args
        url = args.url(hook)
        if self.down is not None:
            raise CallError(self.down)
        try:
            answer = self.ssn.registry.caller.post(url, payload, args.timeout)
        except CallError as exc:
            if isinstance(exc, Unreachable):
                self.down = str(exc)  # not asked again this session
            self._count(hook, "failed", str(exc))
            raise
        self._count(hook, "ok", None)
        self.answered = True
        if hook in ("onSessionOpen", "onSessionClose", "allocateFunc", "deallocateFunc"):
            return None  # Volcano does not read these answers (errorMessage is logged)
        try:
            return orjson.loads(answer)
        except orjson.JSONDecodeError:
            text = f"POST {url}: the answer is not JSON"
            self._count(hook, "invalid", text)
            raise CallError(text) from None

    def _count(self, hook: str, outcome: str, error: str | None) -> None:
        name = f"{hook} {outcome}"
        self.calls[name] = self.calls.get(name, 0) + 1
        if error is not None and self.failed is None:
            self.failed = error

    def _health(self) -> None:
        """One log line when this extender starts failing, one when it answers again."""
        memory: dict[str, str | None] = self.ssn.registry.memory.setdefault("extender", {})
        url = self.args.url_prefix
        before = memory.get(url)
        if self.failed is None and not self.answered:
            return  # not asked anything this session: nothing learnt
        if self.failed is not None and before is None:
            then = "skipped" if self.args.ignorable else "the decisions it is asked about fail"
            log.warning(
                "extender %s: %s (ignorable: %s, so %s)",
                url,
                self.failed,
                str(self.args.ignorable).lower(),
                then,
            )
        elif self.failed is None and before is not None:
            log.info("extender %s answers again", url)
        memory[url] = self.failed

    def _ask(self, hook: str, payload: Callable[[], bytes], on_error: Any) -> Any:
        """The answer, or ``on_error`` when the call failed and the extender is ignorable.
        Raises CallError when it is not."""
        try:
            return self._call(hook, payload())
        except CallError:
            if self.args.ignorable:
                return on_error
            raise

    def interested(self, task: Task) -> bool:
        """``IsInterested``: no managed resources, or a container or init container requests or
        limits one of them (by name)."""
        managed = self.args.managed_resources
        if not managed:
            return True
        known = self._interest.get(task.uid)
        if known is None:
            spec = task.spec
            known = any(
                not managed.isdisjoint(c.resources.requests)
                or not managed.isdisjoint(c.resources.limits)
                for c in (*spec.containers, *spec.init_containers)
            )
            self._interest[task.uid] = known
        return known

    # -- hooks ---------------------------------------------------------------------------------

    def _predicate(self, task: Task, row: int) -> str | None:
        if not self.interested(task):
            return None
        wire = self.wire
        try:
            got = self._ask(
                "predicate", lambda: body(task=wire.task(task), node=wire.node(row)), {}
            )
        except CallError as exc:
            return f"extender: {exc}"
        if not isinstance(got, dict):
            return None
        message = got.get("status")
        if not isinstance(message, str):  # older servers: {"errorMessage": ...}
            message = got.get("errorMessage")
        if not message or not isinstance(message, str):
            return None
        return Curable(message) if got.get("code") == UNSCHEDULABLE else message

    def _prioritize(self, task: Task, rows: IntArray) -> Any:
        if not self.interested(task):
            return 0.0
        wire = self.wire
        try:
            got = self._ask(
                "prioritize", lambda: body(task=wire.task(task), nodes=wire.nodes(rows)), None
            )
        except CallError as exc:
            raise DecisionFailed(f"extender: {exc}") from None
        if got is None:
            return 0.0
        scores = got.get("nodeScore") if isinstance(got, dict) else None
        message = got.get("errorMessage") if isinstance(got, dict) else None
        if message or not isinstance(scores, dict):
            raise DecisionFailed(f"extender prioritize: {message or 'no nodeScore in the answer'}")
        names = self.ssn.nodes.names
        picked = [scores.get(names[r], 0.0) for r in rows.tolist()]
        try:
            return np.array(picked, dtype=np.float64)
        except (TypeError, ValueError):  # a score that is not a number counts 0
            return np.array([_number(v) for v in picked])

    def _victims(self, hook: str) -> Callable[[Task, Sequence[Task]], tuple[Sequence[Task], int]]:
        wire = self.wire

        def choose(evictor: Task, evictees: Sequence[Task]) -> tuple[Sequence[Task], int]:
            if not self.interested(evictor):
                return (), ABSTAIN

            def payload() -> bytes:
                return body(evictor=wire.task(evictor), evictees=[wire.task(t) for t in evictees])

            try:
                got = self._ask(hook, payload, None)
            except CallError:
                return (), REJECT
            if not isinstance(got, dict):
                return (), ABSTAIN
            chosen = {v.get("UID") for v in got.get("victims") or () if isinstance(v, dict)}
            status = got.get("status")
            vote = status if isinstance(status, int) and status in (-1, 0, 1) else ABSTAIN
            return [t for t in evictees if t.uid in chosen], vote

        return choose

    def _about_job(self, hook: str, job: Job) -> Any:
        """The answer about ``job`` (None: skipped); raises CallError after telling the job's
        pods why."""
        try:
            return self._ask(hook, lambda: body(job=self.wire.job(job)), None)
        except CallError as exc:
            job.fit_error = job.fit_error or f"extender: {exc}"
            raise

    def _job_interested(self, job: Job) -> bool:
        return any(self.interested(t) for t in job.tasks.values())

    def _enqueueable(self, job: Job) -> int:
        if not self._job_interested(job):
            return ABSTAIN
        try:
            got = self._about_job("jobEnqueueable", job)
        except CallError:
            return REJECT
        status = got.get("status") if isinstance(got, dict) else None
        return status if isinstance(status, int) and status in (-1, 0, 1) else ABSTAIN

    def _overused(self, queue: Queue) -> bool:
        try:
            got = self._ask("queueOverused", lambda: body(queue=self.wire.queue(queue)), None)
        except CallError as exc:
            self._say_to_queue(queue, f"extender: {exc}")
            return True
        if isinstance(got, dict) and got.get("overused") is True:
            self._say_to_queue(
                queue, f"the extender {self.args.url_prefix} says queue {queue.name} is overused"
            )
            return True
        return False

    def _say_to_queue(self, queue: Queue, why: str) -> None:
        """Tell the queue's jobs why they get nothing more (once per queue and session)."""
        if queue.name in self._told:
            return
        self._told.add(queue.name)
        for job in self.ssn.active_jobs():  # a settled job has nothing to be told
            if job.queue == queue.name and not job.fit_error:
                job.fit_error = why

    def _ready(self, job: Job) -> bool:
        if not self._job_interested(job):
            return True
        try:
            got = self._about_job("jobReady", job)
        except CallError:
            return False
        return got is None or (isinstance(got, dict) and got.get("status") is True)

    def _handler(self) -> EventHandler:
        wire = self.wire

        def tell(hook: str) -> Callable[[Task], None] | None:
            if not self.args.verb(hook):
                return None

            def send(task: Task) -> None:
                if self.interested(task):  # a notification: nothing to fail
                    with contextlib.suppress(CallError):
                        self._call(hook, body(task=wire.task(task)))

            return send

        return EventHandler(allocate=tell("allocateFunc"), deallocate=tell("deallocateFunc"))


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
