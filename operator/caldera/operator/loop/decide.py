"""What runs in the session process: one session on the state it keeps, binds sent ahead.

This module is all the session process imports (with the engine): not the operator's I/O
(kopf, the Kubernetes client, the cache), so the process starts in about half the time and
holds less memory. The operator's side, which starts the process and feeds it, is
:mod:`caldera.operator.loop.worker`.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import stat
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from caldera.api.usage import NodeUsage
from caldera.cache.state import Changes, ClusterState
from caldera.collector import after_build, after_session, fewer_collections
from caldera.framework.cycle import run_cycle
from caldera.framework.intents import Bind, CycleResult
from caldera.framework.policy import Policy
from caldera.framework.registry import Registry
from caldera.model import FULL_REBUILD_EVERY, Model
from caldera.models.parse import ObjectError
from caldera.operator.watch.assume import InFlight, changed_pods, overlaid
from caldera.outside.http import HttpCaller
from caldera.sharding.scope import WHOLE_CLUSTER, Scope

__all__ = [
    "BindStream",
    "Outcome",
    "SessionConfig",
    "Streamed",
    "build_model",
    "decide",
    "new_model",
    "prepare",
    "run_session",
    "start",
]

Outcome = tuple[CycleResult, list[ObjectError]]


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """What every session of this operator is run with."""

    scheduler_names: list[str]
    default_queue: str
    bare_pods_in_memory: bool
    full_rebuild_every: int = FULL_REBUILD_EVERY
    """Every Nth session builds its snapshot from nothing (0: never)."""
    scope: Scope = WHOLE_CLUSTER
    """This instance's share of the cluster (``--node-selector``, the hash split)."""


def new_model(config: SessionConfig) -> Model:
    """The model a session process (or the operator's session thread) keeps."""
    return Model(
        scheduler_names=config.scheduler_names,
        default_queue=config.default_queue,
        bare_pods_in_memory=config.bare_pods_in_memory,
        full_rebuild_every=config.full_rebuild_every,
        scope=config.scope,
    )


def decide(
    state: ClusterState,
    in_flight: InFlight,
    policy: Policy,
    registry: Registry,
    config: SessionConfig,
    *,
    session_id: str,
    model: Model,
    on_bind: Callable[[Bind], None] | None = None,
    evicting: Sequence[str] = (),
    lifting: Sequence[str] = (),
    node_usage: Mapping[str, NodeUsage] | None = None,
    changed: Collection[str] | None = None,
) -> Outcome:
    """One session: the binds still in flight overlaid on ``state`` (the session's own: the
    overlay is made in it, and undone once the snapshot is built), the snapshot from the model,
    the cycle. The same in the worker process and (``--session-process=false``) in a
    thread; ``on_bind`` hears of each bind the moment the session decides it; ``evicting`` pods
    are terminating; ``lifting`` pods have lost their queue-allocation gate; ``node_usage`` is
    the nodes' real load as the metrics source last gave it; ``changed`` are the pods that may
    have changed since the last session (None: not known)."""
    now = time.time()
    start = time.perf_counter()
    with overlaid(state.pods, changed_pods(state.pods, in_flight, evicting, now, lifting)):
        snapshot, problems = model.snapshot(
            state,
            now=now,
            session_id=session_id,
            managed_resources=policy.managed_resources,
            changed=changed,
            overlay=[*in_flight, *evicting, *lifting],
        )
    built = (model.last_build, time.perf_counter() - start)
    if model.last_build == "full":
        after_build()
    if node_usage:
        snapshot.node_usage = node_usage  # read only: the source replaces it, never changes it
    result = run_cycle(snapshot, policy, registry, on_bind, detail=False)
    result.snapshot = built
    del snapshot
    after_session()
    return result, problems


def build_model(
    model: Model,
    state: ClusterState,
    managed: frozenset[str],
    changed: Collection[str] | None = None,
) -> None:
    """Bring ``model`` up to date with ``state`` before the first session (from nothing, or
    from the pods ``changed`` since what it was made from), then keep what it holds out of
    collections (:func:`~caldera.collector.after_build`)."""
    model.snapshot(
        state, now=time.time(), session_id="", managed_resources=managed, changed=changed
    )
    after_build()


Streamed = tuple[str, list[Bind]]
"""(session id, binds) sent ahead of a session's result."""


class BindStream:
    """Binds of a running session, sent ahead in small batches (at most ``size`` binds or
    ``every`` seconds apart), so binding starts long before a large session ends."""

    def __init__(
        self,
        session_id: str,
        send: Callable[[Streamed], object],
        size: int = 64,
        every: float = 0.02,
    ) -> None:
        self._session_id = session_id
        self._send = send
        self._size = size
        self._every = every
        self._batch: list[Bind] = []
        self._last = time.monotonic()

    def add(self, bind: Bind) -> None:
        self._batch.append(bind)
        now = time.monotonic()
        if len(self._batch) >= self._size or now - self._last >= self._every:
            self._send((self._session_id, self._batch))
            self._batch, self._last = [], now


# -- the worker process ------------------------------------------------------------------------

_copy = ClusterState()
_model: Model | None = None
_registry: Registry | None = None
_stream: Any = None
"""The queue binds go out on ahead of the session's result."""
_usage: Mapping[str, NodeUsage] = {}
"""The node usage last sent to this worker process."""


def can_fork() -> bool:
    """Whether the session process can be forked from the operator: where fork exists and the
    process's open descriptors can be listed (to close the sockets it must not keep)."""
    return "fork" in multiprocessing.get_all_start_methods() and os.path.isdir(_FDS)


_FDS = "/proc/self/fd"


def start_forked(stream: Any, state: ClusterState) -> None:
    """The initializer of a session process forked from the operator: it starts from the
    operator's state as it was at the fork (the same objects, shared until written).

    The operator's sockets (API connections, watch streams, the metrics and health listeners)
    are closed here: a copy left open would hold each connection open after the operator
    closed it, and keep a watch the operator dropped streaming to nobody."""
    global _copy
    for name in os.listdir(_FDS):
        fd = int(name)
        with contextlib.suppress(OSError):  # the listing's own descriptor, already gone
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.close(fd)
    _copy = state
    start(stream)


def start(stream: Any) -> None:
    global _registry, _stream
    _stream = stream
    # The operator stops the worker itself; a Ctrl-C or SIGTERM sent to the whole process group
    # must not kill it in the middle of a session.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # ...but it must not outlive an operator that was killed outright (SIGKILL, OOM): it would
    # keep the cluster's state in memory for nobody
    parent = os.getppid()
    threading.Thread(target=_exit_with, args=(parent,), name="parent-watch", daemon=True).start()
    fewer_collections()
    _registry = Registry.from_entry_points()
    _registry.caller = HttpCaller()  # connections to extenders, kept across sessions


def _exit_with(parent: int, every: float = 1.0) -> None:
    """End this process once ``parent`` is gone (this process is then adopted by another)."""
    while os.getppid() == parent:
        time.sleep(every)
    os._exit(0)


def prepare(config: SessionConfig, managed: frozenset[str]) -> int:
    """Build the model of the state this process was forked with, before the first session."""
    global _model
    _model = new_model(config)
    build_model(_model, _copy, managed)
    return len(_copy.pods)


def run_session(
    changes: Changes,
    in_flight: InFlight,
    policy: Policy,
    config: SessionConfig,
    session_id: str,
    evicting: Sequence[str] = (),
    lifting: Sequence[str] = (),
    node_usage: Mapping[str, NodeUsage] | None = None,
) -> Outcome:
    """A session in the worker process; ``node_usage`` is sent only when it changed (None: the
    last one sent still holds)."""
    global _copy, _usage, _model
    _copy = changes.apply_to(_copy)
    if _model is None:
        _model = new_model(config)
    if node_usage is not None:
        _usage = node_usage
    assert _registry is not None
    stream = BindStream(session_id, _stream.put)
    return decide(
        _copy,
        in_flight,
        policy,
        _registry,
        config,
        session_id=session_id,
        model=_model,
        on_bind=stream.add,
        evicting=evicting,
        lifting=lifting,
        node_usage=_usage,
        changed=changes.pod_keys(),
    )
