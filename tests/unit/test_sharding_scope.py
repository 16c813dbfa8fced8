"""Which jobs and nodes are one instance's when several share a cluster, the ways Volcano's
scheduler cache decides it: the hash ring of ``stathat.com/c/consistent`` v1.0.0
(``getMultiSchedulerInfo``, ``responsibleForPod``, ``responsibleForNode``,
``responsibleForPodGroup`` in ``pkg/scheduler/cache/util.go``), ``--node-selector``
(``updateNodeSelectors``, ``nodeCanAddCache``), and the environment that turns the hash split
on."""

from __future__ import annotations

import zlib

import pytest

from caldera.operator.settings import Settings
from caldera.sharding.ring import REPLICAS, HashRing, statefulset_members
from caldera.sharding.scope import WHOLE_CLUSTER, Scope, parse_node_selector

RING = {
    # (members, key): owner. Printed by ``go run`` of a program that adds
    # volcano-scheduler-0 ... -<n-1> to consistent.New() of stathat.com/c/consistent v1.0.0 (the
    # version Volcano's go.mod pins) and prints c.Get(key).
    (2, "job-a"): 0, (2, "job-b"): 1, (2, "tf-mnist"): 1, (2, "pytorch-ddp-7"): 1,
    (2, "node-1"): 0, (2, "node-2"): 0, (2, "node-17"): 1, (2, "worker-0"): 0, (2, "a"): 0,
    (2, ""): 0,
    (3, "job-a"): 0, (3, "job-b"): 1, (3, "tf-mnist"): 1, (3, "pytorch-ddp-7"): 2,
    (3, "node-1"): 0, (3, "node-2"): 0, (3, "node-17"): 1, (3, "worker-0"): 0, (3, "a"): 2,
    (3, ""): 2,
    (4, "job-a"): 0, (4, "job-b"): 1, (4, "tf-mnist"): 3, (4, "pytorch-ddp-7"): 2,
    (4, "node-1"): 0, (4, "node-2"): 0, (4, "node-17"): 1, (4, "worker-0"): 0, (4, "a"): 3,
    (4, ""): 2,
}  # fmt: skip


@pytest.mark.parametrize(("members", "key"), RING, ids=[f"{n} schedulers, {k!r}" for n, k in RING])
def test_the_ring_gives_each_key_the_scheduler_gos_library_does(members: int, key: str) -> None:
    ring = HashRing([f"volcano-scheduler-{i}" for i in range(members)])
    assert ring.get(key) == f"volcano-scheduler-{RING[members, key]}"


def test_the_ring_is_the_first_point_strictly_above_the_keys_crc32() -> None:
    """``search``: ``sort.Search`` for the first point ``> crc32(key)``, wrapping to the lowest;
    point ``i`` of a member is ``crc32(strconv.Itoa(i) + member)``."""
    members = ["s-0", "s-1", "s-2"]
    points = sorted((zlib.crc32(f"{i}{m}".encode()), m) for m in members for i in range(REPLICAS))
    ring = HashRing(members)
    for key in (f"pod-{n}" for n in range(200)):
        h = zlib.crc32(key.encode())
        above = [m for p, m in points if p > h]
        assert ring.get(key) == (above[0] if above else points[0][1])
    assert HashRing([]).get("x") == ""


def test_the_members_are_the_statefulsets_pods() -> None:
    assert statefulset_members("caldera-scheduler-2", 3) == [
        "caldera-scheduler-0",
        "caldera-scheduler-1",
        "caldera-scheduler-2",
    ]


SELECTORS = {
    "one label": (["volcano.sh/role:train"], {"volcano.sh/role:train"}),
    "spaces around the colon trimmed": ([" role : serving "], {"role:serving"}),
    "no colon, or nothing after it: passed over": (["role", "role:", ":x"], {":x"}),
    "the value keeps later colons": (["zone:a:b"], {"zone:a:b"}),
}


@pytest.mark.parametrize(("entries", "want"), SELECTORS.values(), ids=SELECTORS.keys())
def test_update_node_selectors(entries: list[str], want: set[str]) -> None:
    assert parse_node_selector(entries) == want


def test_a_node_is_in_scope_when_it_carries_any_selected_label() -> None:
    """``nodeCanAddCache``: any one label of the selector is enough."""
    scope = Scope(frozenset({"role:train", "role:serving"}))
    assert scope.node("n1", {"role": "train", "zone": "a"})
    assert scope.node("n2", {"role": "serving"})
    assert not scope.node("n3", {"role": "batch"})
    assert not scope.node("n4", {})
    assert WHOLE_CLUSTER.node("n4", {}) and WHOLE_CLUSTER.whole


def test_a_hash_split_gives_every_job_and_node_to_exactly_one_instance() -> None:
    members = tuple(statefulset_members("caldera-0", 3))
    scopes = [Scope(frozenset(), me, members) for me in members]
    for n in range(300):
        assert sum(s.node(f"node-{n}", {}) for s in scopes) == 1
        assert sum(s.owns(f"pod-{n}", []) for s in scopes) == 1
    # a pod goes by its first owner (its Job), so a job's pods stay together
    assert [s.owns("job-a-worker-3", ["job-a"]) for s in scopes] == [
        s.owns("job-a", []) for s in scopes
    ]


def test_the_environment_turns_the_hash_split_on() -> None:
    env = {
        "MULTI_SCHEDULER_ENABLE": "true",
        "SCHEDULER_NUM": "3",
        "SCHEDULER_POD_NAME": "caldera-scheduler-1",
    }
    settings = Settings(node_selector=["role:train,role:serving"])
    scope = settings.scope(env)
    assert scope.me == "caldera-scheduler-1"
    assert scope.members == ("caldera-scheduler-0", "caldera-scheduler-1", "caldera-scheduler-2")
    assert scope.node_selector == {"role:train", "role:serving"}
    assert settings.lock(scope) == "volcano-caldera-scheduler-1"
    assert settings.scope({**env, "MULTI_SCHEDULER_ENABLE": "false"}).members == ()
    assert settings.scope({**env, "SCHEDULER_NUM": "three"}).members == ("caldera-scheduler-0",)
    with pytest.raises(ValueError, match="SCHEDULER_POD_NAME 'caldera'"):
        settings.scope({**env, "SCHEDULER_POD_NAME": "caldera"})
    assert Settings().lock(Settings().scope({})) == "volcano"


def test_peer_scheduler_names_are_read_as_the_flag_gives_them_and_never_our_own() -> None:
    settings = Settings(scheduler_names=["train"], peer_scheduler_names=["serve, infer", "batch"])
    scope = settings.scope({})
    assert scope.peers == {"serve", "infer", "batch"} and scope.name == "train"
    assert scope.counts_others and not scope.writes_queues  # "batch" sorts before "train"
    with pytest.raises(ValueError, match="--peer-scheduler-name train: this instance's own"):
        Settings(scheduler_names=["train"], peer_scheduler_names=["train"]).scope({})


def test_caldera_run_refuses_a_peer_of_its_own_name_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from caldera.cli import main

    code = main(["run", "--scheduler-name", "a", "--peer-scheduler-name", "a", "--api-wait", "1s"])
    assert code == 2
    assert capsys.readouterr().err.count("\n") == 1
