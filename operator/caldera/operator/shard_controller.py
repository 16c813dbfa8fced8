"""Volcano's sharding controller as ``caldera shard-controller``: it writes the NodeShards the
schedulers of a sharded cluster follow (``--scheduler-sharding-mode hard`` or ``soft``).

It watches nodes, pods, NodeShards and the sharding ConfigMap (``--sharding-configmap``, key
``sharding.yaml``; Volcano's ``ShardingController``), works out each node's CPU utilisation from
the pods on it, and gives each configured scheduler its nodes by the policies of
:mod:`caldera.sharding.assign` (``CalculateShardAssignments``). It then creates the NodeShards
that do not exist, rewrites ``spec.nodesDesired`` of those whose assignment changed enough
(``applyAssignment``), and deletes those of schedulers no longer configured
(``cleanupStaleNodeShards``). It recomputes every ``shardSyncPeriod`` and, with
``enableNodeEventTrigger``, soon after a change of the cluster. An unreadable ConfigMap is
reported in the log, naming the key at fault, and the last good configuration stays. A Lease
(``--leader-elect``) keeps one controller writing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, replace

from caldera.cache.state import ClusterState
from caldera.k8s.client import load_configuration
from caldera.k8s.errors import API_ERRORS, describe
from caldera.k8s.lease import LeaderGate
from caldera.k8s.resources import NODESHARDS
from caldera.k8s.rest import MERGE_PATCH, Rest
from caldera.models.core import Pod
from caldera.models.kinds import KINDS, Kind
from caldera.operator.watch.cache import Cache
from caldera.operator.watch.informer import Informer
from caldera.sharding.assign import (
    ShardWrite,
    calculate_assignments,
    node_table,
    shard_writes,
    stale_shards,
)
from caldera.sharding.assign_config import (
    DEFAULT_CONFIGMAP_NAME,
    DEFAULT_CONFIGMAP_NAMESPACE,
    FLAG_SHARD_SYNC_PERIOD,
    ShardingConfig,
    node_event_trigger,
    parse_scheduler_flags,
    parse_sharding_configmap,
    shard_sync_period,
)
from caldera.sharding.assign_decode import ShardingConfigError
from caldera.sharding.assign_metrics import node_metrics

__all__ = ["ControllerSettings", "ShardController", "run_controller"]

log = logging.getLogger(__name__)
EVENT_DELAY = 1.0
"""Seconds a change of the cluster waits for more before the assignment is worked out again."""


@dataclass(slots=True)
class ControllerSettings:
    kubeconfig: str | None = None
    sharding_configmap: str = DEFAULT_CONFIGMAP_NAME
    sharding_configmap_namespace: str = DEFAULT_CONFIGMAP_NAMESPACE
    leader_elect: bool = True
    lock_namespace: str = "volcano-system"
    lock_name: str = "volcano-sharding-controller"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def _kinds(settings: ControllerSettings) -> list[Kind]:
    """Nodes, pods and NodeShards whole, and the one sharding ConfigMap by name."""
    key = f"{settings.sharding_configmap_namespace}/{settings.sharding_configmap}"
    config_map = replace(KINDS["ConfigMap"], label_selectors=(), named=(key,))
    return [KINDS["Node"], KINDS["Pod"], KINDS["NodeShard"], config_map]


class ShardController:
    """What one pass decides and writes; :func:`run_controller` drives it."""

    def __init__(self, rest: Rest, settings: ControllerSettings) -> None:
        self._rest = rest
        self._key = f"{settings.sharding_configmap_namespace}/{settings.sharding_configmap}"
        self.config: ShardingConfig = ShardingConfig(parse_scheduler_flags())
        """The configuration in force: the ConfigMap's, else Volcano's flag defaults."""
        self.period = FLAG_SHARD_SYNC_PERIOD
        self.on_events = True
        self._text: str | None = None

    def read_config(self, state: ClusterState) -> None:
        """``reloadFromConfigMap``: take the ConfigMap's configuration when it changed and
        reads; a broken one is reported and the last good one stays."""
        found = state.config_maps.get(self._key)
        data = {} if found is None else dict(found.data or {})
        text = repr(sorted(data.items()))
        if text == self._text:
            return
        self._text = text
        try:
            config = parse_sharding_configmap(data)
        except ShardingConfigError as exc:
            where = f"{exc.key}: " if exc.key else ""
            log.error(
                "sharding ConfigMap %s: %s%s; keeping the previous configuration",
                self._key,
                where,
                exc,
            )
            return
        if config is None:
            return  # no sharding.yaml: Volcano keeps what it has
        self.config = config
        self.period = shard_sync_period(config, self.period)
        self.on_events = node_event_trigger(config, self.on_events)
        names = ", ".join(s.name for s in config.scheduler_configs)
        log.info("sharding configuration from %s: %s", self._key, names)

    def decide(self, state: ClusterState) -> tuple[list[ShardWrite], tuple[str, ...]]:
        """The NodeShards to create or rewrite, and those to delete."""
        on_node: dict[str, list[Pod]] = {}
        for pod in state.pods.values():
            if pod.spec.node_name:
                on_node.setdefault(pod.spec.node_name, []).append(pod)
        util = {
            name: node_metrics(node, on_node.get(name, ())).cpu_utilization
            for name, node in state.nodes.items()
        }
        labels = {name: dict(node.metadata.labels) for name, node in state.nodes.items()}
        assignments = calculate_assignments(self.config, node_table(labels, util))
        return shard_writes(assignments, state.node_shards), stale_shards(
            state.node_shards, assignments
        )

    async def write(self, writes: list[ShardWrite], stale: tuple[str, ...]) -> None:
        for w in writes:
            spec = {"nodesDesired": list(w.nodes_desired)}
            try:
                if w.create:
                    body = {
                        "apiVersion": KINDS["NodeShard"].api_version,
                        "kind": "NodeShard",
                        "metadata": {"name": w.name},
                        "spec": spec,
                    }
                    await self._rest.call("create", NODESHARDS, body=body)
                else:
                    await self._rest.call(
                        "patch",
                        NODESHARDS,
                        name=w.name,
                        body={"spec": spec},
                        content_type=MERGE_PATCH,
                    )
                log.info("NodeShard %s: %d nodes (+%d, -%d)", w.name, len(w.nodes_desired),
                         len(w.nodes_to_add), len(w.nodes_to_remove))  # fmt: skip
            except API_ERRORS as exc:
                log.warning("NodeShard %s not written: %s", w.name, describe(exc))
        for name in stale:
            try:
                await self._rest.call("delete", NODESHARDS, name=name)
                log.info("NodeShard %s deleted: no scheduler of that name is configured", name)
            except API_ERRORS as exc:
                log.warning("NodeShard %s not deleted: %s", name, describe(exc))


async def run_controller(settings: ControllerSettings, stop: asyncio.Event) -> None:
    """Run until ``stop`` is set."""
    rest = Rest(await load_configuration(settings.kubeconfig))
    news = asyncio.Event()
    cache = Cache([], kinds=_kinds(settings), on_news=news.set)
    informers = [
        Informer(rest, kind, cache, selector=selector)
        for kind in _kinds(settings)
        for selector in kind.selectors
    ]
    leader = LeaderGate(settings.leader_elect)
    tasks = [asyncio.create_task(i.run(), name=f"watch-{i.kind.plural}") for i in informers]
    tasks.append(
        asyncio.create_task(
            leader.run(
                rest.api_client,
                name=settings.lock_name,
                namespace=settings.lock_namespace,
                lease=settings.lease_duration,
                renew=settings.renew_deadline,
                retry=settings.retry_period,
                on_lost=stop.set,
            )
        )
    )
    controller = ShardController(rest, settings)
    try:
        await _first(cache.synced, stop)
        while not stop.is_set():
            news.clear()
            if leader.leading:
                controller.read_config(cache.state)
                await controller.write(*controller.decide(cache.state))
            await _wait(controller, news, stop)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if leader.leading:
            with contextlib.suppress(*API_ERRORS):
                await leader.release(
                    rest, name=settings.lock_name, namespace=settings.lock_namespace
                )
        await rest.close()


async def _first(*events: asyncio.Event) -> None:
    """Until one of ``events`` is set."""
    waits = [asyncio.create_task(e.wait()) for e in events]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in waits:
        task.cancel()


async def _wait(controller: ShardController, news: asyncio.Event, stop: asyncio.Event) -> None:
    """Until the next pass: the sync period, or a change of the cluster (then a second more)."""
    waits = [asyncio.create_task(stop.wait())]
    if controller.on_events:
        waits.append(asyncio.create_task(news.wait()))
    _, pending = await asyncio.wait(waits, timeout=controller.period, return_when="FIRST_COMPLETED")
    for task in pending:
        task.cancel()
    if news.is_set() and not stop.is_set():
        await asyncio.sleep(EVENT_DELAY)
