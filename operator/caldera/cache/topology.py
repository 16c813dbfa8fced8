"""The network-topology parts of a snapshot: the HyperNode tree and jobs' sub-groups.

Kept apart from the snapshot builder because both are derived data with their own rules: the tree
from HyperNode objects over every node of the cluster (:func:`~caldera.api.hypernode.build_tree`),
the sub-groups from a PodGroup's ``subGroupPolicy`` over its pods' labels.
"""

from __future__ import annotations

from caldera.api.hypernode import HyperNodeTree, Problem, build_tree
from caldera.api.job import Job, SubGroup
from caldera.api.node import NodeTable
from caldera.cache.state import ClusterState
from caldera.models.volcano import PodGroup

__all__ = ["assign_subgroups", "hypernode_tree"]


def hypernode_tree(
    state: ClusterState, table: NodeTable
) -> tuple[HyperNodeTree | None, list[Problem]]:
    """The tree of the cluster's HyperNodes over the session's node table (None: there are
    none), and what had to be ignored."""
    if not state.hypernodes:
        return None, []
    labels = {name: node.metadata.labels for name, node in state.nodes.items()}
    return build_tree(state.hypernodes, labels, table.index, len(table))


def assign_subgroups(job: Job, pg: PodGroup) -> None:
    """Split the job's tasks into the sub-groups of its ``subGroupPolicy`` (Volcano's
    ``getSubJobMatchValues``): a task belongs to the first policy whose selector it matches and
    whose every ``matchLabelKeys`` label it has, non-empty; tasks with equal values share a
    sub-group."""
    found: dict[str, SubGroup] = {}
    for task in sorted(job.tasks.values(), key=lambda t: t.name):
        for policy in pg.spec.sub_group_policy:
            if policy.label_selector is not None and not policy.label_selector.matches(task.labels):
                continue
            values = [task.labels.get(k, "") for k in policy.match_label_keys]
            if not all(values):
                continue
            name = f"{policy.name}-{'-'.join(values)}"
            sg = found.get(name)
            if sg is None:
                sg = found[name] = SubGroup(
                    policy.name, name, policy.sub_group_size, policy.network_topology
                )
            sg.tasks.append(task.uid)
            break
    job.subgroups = [found[n] for n in sorted(found)]
    job.min_subgroups = {
        p.name: p.min_sub_groups for p in pg.spec.sub_group_policy if p.min_sub_groups
    }
