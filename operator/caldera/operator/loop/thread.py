"""Sessions in a thread of the operator (the default): one copy of each object, changes only.

The thread keeps its own tables of the cache's objects: the same objects (records and models are
immutable), so nothing is copied but the dictionaries, once. Each session brings them up to date
with what the cache changed since the last one (:meth:`Cache.take_changes`, objects, not JSON)
and runs :func:`~caldera.operator.loop.decide.decide` on them with the model of the cluster it
keeps. The operator's side of a session process is :mod:`caldera.operator.loop.worker`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence

from caldera.api.usage import NodeUsage
from caldera.cache.state import ClusterState, copy_state
from caldera.framework.policy import Policy
from caldera.framework.registry import Registry
from caldera.operator.loop.decide import (
    BindStream,
    Outcome,
    SessionConfig,
    Streamed,
    build_model,
    decide,
    new_model,
)
from caldera.operator.watch.assume import InFlight
from caldera.operator.watch.cache import Cache
from caldera.outside.http import HttpCaller

__all__ = ["SessionThread"]


class SessionThread:
    """Where sessions run without ``--session-process``: the model and the tables they read."""

    def __init__(self, config: SessionConfig, cache: Cache, registry: Registry) -> None:
        self._config = config
        self._cache = cache
        self._registry = registry
        self._caller = registry.caller = HttpCaller()  # extenders, kept across sessions
        self._model = new_model(config)
        """The model of the cluster kept across sessions."""
        self._copy: ClusterState | None = None
        """The thread's own tables of the cache's objects (shared, immutable), brought up to
        date each session with what the cache changed."""

    async def decide(
        self,
        in_flight: InFlight,
        policy: Policy,
        session_id: str,
        evicting: Sequence[str],
        lifting: Sequence[str],
        node_usage: Mapping[str, NodeUsage],
        on_binds: Callable[[Streamed], None],
    ) -> Outcome:
        """One session in the thread; ``on_binds`` is called on the event loop with the binds
        sent ahead of its result."""
        changed = self._take_changes()
        loop = asyncio.get_running_loop()
        stream = BindStream(session_id, lambda item: loop.call_soon_threadsafe(on_binds, item))
        return await asyncio.to_thread(
            decide,
            self._copied(),
            in_flight,
            policy,
            self._registry,
            self._config,
            session_id=session_id,
            model=self._model,
            on_bind=stream.add,
            evicting=evicting,
            lifting=lifting,
            node_usage=node_usage,
            changed=changed,
        )

    async def warm(self, managed: frozenset[str]) -> None:
        """Build the model of the cluster before the first session, as a forked session
        process builds its own, so the first pod does not wait for it."""
        changed = self._take_changes()
        await asyncio.to_thread(build_model, self._model, self._copied(), managed, changed)

    async def prepare(self, keys: list[str], managed: frozenset[str]) -> None:
        """While the pods are listed (a page stored, the next on its way), make ahead what the
        first build makes of each pod alone; the build after the listing then assembles them.
        (Feeding each page to the model as changes cost twice the build from nothing.)"""
        held = self._cache.state
        # the thread reads its own tables: the event loop goes on changing the cache's
        state = ClusterState(
            nodes=dict(held.nodes), podgroups=dict(held.podgroups), queues=dict(held.queues)
        )
        pods = {key: held.pods[key] for key in keys if key in held.pods}
        await asyncio.to_thread(self._model.prepare, state, pods, managed)

    def close(self) -> None:
        """Close the connections to extenders."""
        self._caller.close()

    def _take_changes(self) -> Collection[str] | None:
        """Bring the thread's tables up to date with the cache's; returns the pods that changed
        (None: the tables are new, copied from the cache's)."""
        if self._copy is None:
            self._cache.forget_changes()
            self._copy = copy_state(self._cache.state)  # the objects are shared
            return None
        changes = self._cache.take_changes()
        self._copy = changes.apply_to(self._copy)
        return changes.pod_keys()

    def _copied(self) -> ClusterState:
        assert self._copy is not None
        return self._copy
