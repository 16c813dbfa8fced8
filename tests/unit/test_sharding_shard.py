"""A scheduler's NodeShard, as Volcano's scheduler cache reads and writes it
(``pkg/scheduler/cache/shard_coordinator.go``), rows after ``shard_coordinator_test.go``."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from caldera.models.shard import NodeShard
from caldera.sharding.shard import (
    HARD,
    NONE,
    SOFT,
    ShardStatus,
    nodes_in_use,
    shard_status,
    shard_view,
)


def shard(name: str, desired: list[str], in_use: Sequence[str] = ()) -> NodeShard:
    return NodeShard.model_validate(
        {
            "metadata": {"name": name},
            "spec": {"nodesDesired": desired},
            "status": {"nodesInUse": list(in_use)},
        }
    )


SHARDS = {
    s.metadata.name: s
    for s in (
        shard("test-shard", ["node-1", "node-2", "node-3", "node-4"], ["node-1", "node-2"]),
        shard("other-shard-1", ["node-2", "node-3"], ["node-2"]),
        shard("other-shard-2", ["node-3", "node-4"], ["node-3", "node-4"]),
    )
}


@pytest.mark.parametrize(
    ("name", "want"),
    [
        pytest.param(
            "test-shard", {"node-1"}, id="TestGetAvailableNodesFromShard: basic calculation"
        ),
        pytest.param(
            "other-shard-1", set(), id="TestGetAvailableNodesFromShard: no overlapping usage"
        ),
        pytest.param(
            "other-shard-2",
            {"node-3", "node-4"},
            id="TestGetAvailableNodesFromShard: all nodes used by others",
        ),
        pytest.param("non-existent-shard", set(), id="TestRefreshNodeShards_ShardNotFound"),
    ],
)
def test_get_available_nodes_from_shard(name: str, want: set[str]) -> None:
    assert nodes_in_use(name, SHARDS) == want


def test_generate_node_shard_with_status_records_transition_nodes() -> None:
    """``TestGenerateNodeShardWithStatusRecordsTransitionNodes``: a node still in use but no
    longer desired is to remove, a desired one not yet in use is to add."""
    got = shard_status(shard("test-shard", ["node-new"]), frozenset({"node-old"}))
    assert got == ShardStatus("test-shard", ("node-old",), ("node-old",), ("node-new",))


def test_an_unchanged_status_is_not_written_again() -> None:
    written = NodeShard.model_validate(
        {
            "metadata": {"name": "s"},
            "spec": {"nodesDesired": ["a", "b"]},
            "status": {"nodesInUse": ["b", "a"], "nodesToAdd": []},
        }
    )
    assert shard_status(written, frozenset({"a", "b"})) is None


def test_the_view_marks_the_shards_rows_and_only_in_a_sharding_mode() -> None:
    rows = ["node-1", "node-2", "node-3"]
    assert shard_view(NONE, "test-shard", SHARDS, rows) is None
    for mode in (HARD, SOFT):
        view = shard_view(mode, "test-shard", SHARDS, rows)
        assert view is not None and view.mode == mode
        assert view.rows.tolist() == [True, False, False]
        assert view.status == ShardStatus(
            "test-shard", ("node-1",), (), ("node-2", "node-3", "node-4")
        )
    missing = shard_view(HARD, "nobody", SHARDS, rows)
    assert missing is not None and not missing.rows.any() and missing.status is None
