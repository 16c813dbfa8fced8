"""Volcano's NodeShard (``shard.volcano.sh/v1alpha1``): the nodes one scheduler places pods on
when a sharding controller splits the cluster between schedulers.

The controller writes ``spec.nodesDesired``; the scheduler named like the NodeShard writes its
``status``: the nodes it uses now, and those it waits for while another scheduler still uses them
(Volcano's ``NodeShardSpec``, ``NodeShardStatus``).
"""

from __future__ import annotations

from pydantic import Field

from caldera.models.base import ApiModel, ObjectMeta, Timestamp

__all__ = ["NodeShard", "NodeShardSpec", "NodeShardStatus"]


class NodeShardSpec(ApiModel):
    nodes_desired: tuple[str, ...] = ()


class NodeShardStatus(ApiModel):
    last_update_time: Timestamp = None
    nodes_in_use: tuple[str, ...] = ()
    nodes_to_remove: tuple[str, ...] = ()
    nodes_to_add: tuple[str, ...] = ()


class NodeShard(ApiModel):
    metadata: ObjectMeta
    spec: NodeShardSpec = Field(default_factory=NodeShardSpec)
    status: NodeShardStatus = Field(default_factory=NodeShardStatus)
