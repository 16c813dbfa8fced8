"""The operator's cache: what it parses, what it stores, and what it calls news."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import orjson
import pytest

from caldera.cache.state import ClusterState
from caldera.k8s.listing import list_json, resource_version
from caldera.k8s.resources import resource_of
from caldera.models.core import Pod
from caldera.models.kinds import KINDS
from caldera.operator.watch.cache import Cache
from integration.harness import node, pod, podgroup

POD, NODE, PODGROUP = KINDS["Pod"], KINDS["Node"], KINDS["PodGroup"]


class Recorder:
    def __init__(self) -> None:
        self.news = 0
        self.malformed: list[str] = []

    def cache(self) -> Cache:
        return Cache(
            ["volcano"],
            on_news=self.poke,
            on_malformed=lambda kind, raw, message: self.malformed.append(message),
        )

    def poke(self) -> None:
        self.news += 1


def _uid(obj: dict[str, Any], uid: str = "u1") -> dict[str, Any]:
    obj["metadata"]["uid"] = uid
    return obj


def bound_to_n1(raw: dict[str, Any]) -> dict[str, Any]:
    """The pod as a watch sends it back once it is bound to n1."""
    bound = copy.deepcopy(raw)
    bound["spec"]["nodeName"] = "n1"
    return bound


def test_a_kubelet_heartbeat_is_dropped_before_it_is_parsed() -> None:
    r = Recorder()
    cache = r.cache()
    raw = _uid(node("n1"))
    cache.apply(NODE, "ADDED", raw)
    parsed, news = cache.parsed, r.news
    beat = copy.deepcopy(raw)
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-11-24T00:00:00Z"
    beat["metadata"]["resourceVersion"] = "99"
    cache.apply(NODE, "MODIFIED", beat)
    assert (cache.parsed, r.news) == (parsed, news)
    assert len(cache.take_changes()) == 1  # only the first version was ever stored


def test_a_node_that_changes_what_fits_is_news() -> None:
    r = Recorder()
    cache = r.cache()
    cache.apply(NODE, "ADDED", _uid(node("n1")))
    news = r.news
    cache.apply(NODE, "MODIFIED", _uid(node("n1", cpu="8")))
    assert r.news == news + 1
    assert cache.state.nodes["n1"].allocatable["cpu"] == 8000


def test_a_pending_pod_is_news_its_bind_confirmation_is_not_and_its_end_is() -> None:
    r = Recorder()
    cache = r.cache()
    raw = _uid(pod("p"))
    cache.apply(POD, "ADDED", raw)
    assert r.news == 1
    bound = bound_to_n1(raw)
    cache.apply(POD, "MODIFIED", bound)
    assert r.news == 1  # our own bind coming back: stored, but nothing new to decide
    assert cache.state.pods["default/p"].spec.node_name == "n1"
    done = copy.deepcopy(bound)
    done["status"] = {"phase": "Succeeded"}
    cache.apply(POD, "MODIFIED", done)
    assert r.news == 2  # capacity freed


def test_another_schedulers_pending_pod_is_stored_but_not_news() -> None:
    r = Recorder()
    cache = r.cache()
    cache.apply(POD, "ADDED", _uid(pod("theirs", scheduler="default-scheduler")))
    assert r.news == 0 and "default/theirs" in cache.state.pods


def test_a_podgroup_status_written_by_us_is_not_news_but_its_spec_is() -> None:
    r = Recorder()
    cache = r.cache()
    raw = _uid(podgroup("g", 2))
    cache.apply(PODGROUP, "ADDED", raw)
    news = r.news
    written = copy.deepcopy(raw)
    written["status"] = {"phase": "Inqueue"}
    cache.apply(PODGROUP, "MODIFIED", written)
    assert r.news == news
    assert cache.state.podgroups["default/g"].status.phase == "Inqueue"
    resized = copy.deepcopy(written)
    resized["spec"]["minMember"] = 3
    cache.apply(PODGROUP, "MODIFIED", resized)
    assert r.news == news + 1


def test_a_malformed_object_is_reported_once_left_out_and_taken_back_when_fixed() -> None:
    r = Recorder()
    cache = r.cache()
    good = _uid(pod("p"))
    cache.apply(POD, "ADDED", good)
    broken = copy.deepcopy(good)
    broken["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1x"
    cache.apply(POD, "MODIFIED", broken)
    cache.apply(POD, "MODIFIED", broken)
    assert len(r.malformed) == 1 and "invalid quantity '1x'" in r.malformed[0]
    assert "default/p" not in cache.state.pods
    cache.apply(POD, "MODIFIED", good)
    assert "default/p" in cache.state.pods


def test_a_relist_drops_what_was_deleted_while_the_watch_was_away() -> None:
    r = Recorder()
    cache = r.cache()
    cache.replace(POD, [_uid(pod("a"), "ua"), _uid(pod("b"), "ub")])
    cache.take_changes()
    cache.replace(POD, [_uid(pod("a"), "ua")])
    assert set(cache.state.pods) == {"default/a"}
    changes = cache.take_changes()
    assert changes.tables["pods"] == ({}, ["default/b"])


def test_the_cache_is_synced_once_every_kind_is_listed() -> None:
    r = Recorder()
    cache = Cache(["volcano"], kinds=[POD, NODE], on_news=r.poke)
    cache.replace(POD, [])
    assert not cache.synced.is_set()
    cache.replace(NODE, [])
    assert cache.synced.is_set() and r.news == 1


def test_our_own_verdict_on_a_pending_pod_coming_back_is_not_news() -> None:
    r = Recorder()
    cache = r.cache()
    raw = _uid(pod("p"))
    cache.apply(POD, "ADDED", raw)
    told = copy.deepcopy(raw)
    told["status"] = {
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no"}
        ]
    }
    cache.apply(POD, "MODIFIED", told)
    assert r.news == 1  # stored (so it is not written again), but no new session for it
    assert cache.state.pods["default/p"].status.condition("PodScheduled") is not None


def a_session_copy_of_pod_p() -> tuple[Cache, dict[str, Any], ClusterState]:
    """A cache that has been told pod p was added, the pod as the API sent it, and the cluster
    as a session process copied it then (the cache's changes taken)."""
    cache = Recorder().cache()
    raw = _uid(pod("p"))
    cache.apply(POD, "ADDED", raw)
    return cache, raw, cache.everything().apply_to(ClusterState())


def test_a_bind_coming_back_is_applied_without_parsing_and_sent_as_just_the_node() -> None:
    cache, raw, copy_ = a_session_copy_of_pod_p()
    parsed = cache.parsed
    bound = bound_to_n1(raw)
    bound["status"] = {"conditions": [{"type": "PodScheduled", "status": "True"}]}
    cache.apply(POD, "MODIFIED", bound)
    assert cache.parsed == parsed
    assert cache.state.pods["default/p"].spec.node_name == "n1"
    changes = cache.take_changes()
    assert changes.bound == {"default/p": "n1"}
    assert changes.tables["pods"] == ({}, [])
    assert changes.apply_to(copy_).pods["default/p"].spec.node_name == "n1"


def test_a_bind_that_comes_with_other_changes_is_parsed_and_sent_whole() -> None:
    r = Recorder()
    cache = r.cache()
    raw = _uid(pod("p"))
    cache.apply(POD, "ADDED", raw)
    cache.take_changes()
    parsed = cache.parsed
    changed = bound_to_n1(raw)
    changed["metadata"]["labels"] = {"app": "web"}
    cache.apply(POD, "MODIFIED", changed)
    assert cache.parsed == parsed + 1
    changes = cache.take_changes()
    assert changes.bound == {} and set(changes.tables["pods"][0]) == {"default/p"}


def test_a_bind_right_after_another_change_still_sends_that_change() -> None:
    # a GPU pod: its card assignment is patched on, then it is bound, both before the next
    # session takes the changes; the session process must get the annotations too
    cache, raw, copy_ = a_session_copy_of_pod_p()
    patched = copy.deepcopy(raw)
    patched["metadata"]["annotations"] = {"hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,1,0:;"}
    cache.apply(POD, "MODIFIED", patched)
    cache.apply(POD, "MODIFIED", bound_to_n1(patched))
    got = cache.take_changes().apply_to(copy_).pods["default/p"]
    assert got.spec.node_name == "n1"
    assert got.metadata.annotations == {"hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,1,0:;"}


def test_annotations_patched_on_then_a_bind_are_applied_and_sent_without_parsing() -> None:
    cache, raw, copy_ = a_session_copy_of_pod_p()
    parsed = cache.parsed
    notes = {"hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,1,0:;", "hami.io/vgpu-node": "n1"}
    patched = copy.deepcopy(raw)
    patched["metadata"]["annotations"] = notes
    cache.apply(POD, "MODIFIED", patched)
    cache.apply(POD, "MODIFIED", bound_to_n1(patched))
    assert cache.parsed == parsed  # neither event was validated again
    held = cache.state.pods["default/p"]
    assert (held.spec.node_name, held.metadata.annotations) == ("n1", notes)
    changes = cache.take_changes()
    assert (changes.annotated, changes.bound) == ({"default/p": notes}, {"default/p": "n1"})
    assert changes.tables["pods"] == ({}, [])
    got = changes.apply_to(copy_).pods["default/p"]
    assert (got.spec.node_name, got.metadata.annotations) == ("n1", notes)


def test_a_card_assignment_patched_on_a_pending_pod_or_a_node_lock_is_not_news() -> None:
    r = Recorder()
    cache = r.cache()
    raw = _uid(pod("p"))
    gpu_node = node("n1")
    gpu_node["metadata"]["annotations"] = {"hami.io/node-nvidia-register": "[]"}
    cache.apply(POD, "ADDED", raw)
    cache.apply(NODE, "ADDED", gpu_node)
    news, parsed = r.news, cache.parsed
    patched = copy.deepcopy(raw)
    patched["metadata"]["annotations"] = {
        "hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,1,0:;",
        "hami.io/bind-phase": "allocating",
    }
    cache.apply(POD, "MODIFIED", patched)
    locked = copy.deepcopy(gpu_node)
    locked["metadata"]["annotations"]["hami.io/mutex.lock"] = "2026-11-24T00:00:00Z,default,p"
    cache.apply(NODE, "MODIFIED", locked)
    assert (r.news, cache.parsed) == (news, parsed)  # our own writes: no session, no parse
    # a selector annotation on a pending pod, or a changed registration, is news
    chosen = copy.deepcopy(patched)
    chosen["metadata"]["annotations"]["nvidia.com/use-gputype"] = "A100"
    cache.apply(POD, "MODIFIED", chosen)
    assert r.news == news + 1
    registered = copy.deepcopy(locked)
    registered["metadata"]["annotations"]["hami.io/node-nvidia-register"] = "[{}]"
    cache.apply(NODE, "MODIFIED", registered)
    assert r.news == news + 2


def test_a_nodes_soft_split_say_is_news_and_our_ascend_bind_writes_are_not() -> None:
    # Ascend: the node's hami-vnpu-core decides where a soft split may go; the bind writes
    # predicate-time and huawei.com/<type> beside HAMi's keys
    r = Recorder()
    cache = r.cache()
    raw = _uid(node("n1"))
    raw["metadata"]["annotations"] = {"hami.io/node-register-Ascend910B3": "[]"}
    cache.apply(NODE, "ADDED", raw)
    pending = _uid(pod("p"), "p1")
    cache.apply(POD, "ADDED", pending)
    news = r.news
    written = copy.deepcopy(pending)
    written["metadata"]["annotations"] = {
        "hami.io/Ascend910B3-devices-allocated": "NPU-0,Ascend910B3,4096,1:;",
        "predicate-time": "1800000000",
        "huawei.com/Ascend910B3": '[{"UUID":"NPU-0"}]',
    }
    cache.apply(POD, "MODIFIED", written)
    assert r.news == news  # our own writes
    soft = copy.deepcopy(raw)
    soft["metadata"]["annotations"]["hami-vnpu-core"] = "true"
    cache.apply(NODE, "MODIFIED", soft)
    assert r.news == news + 1
    assert cache.state.nodes["n1"].metadata.annotations["hami-vnpu-core"] == "true"


def _replica_set(app: str, ready: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "default", "uid": "rs1"},
        "spec": {"selector": {"matchLabels": {"app": app}}, "replicas": 3},
        "status": {"readyReplicas": ready},
    }


def test_a_selector_kind_keeps_its_selector_current_and_is_never_news() -> None:
    r = Recorder()
    cache = r.cache()
    rs = KINDS["ReplicaSet"]
    cache.apply(rs, "ADDED", _replica_set("web"))
    parsed, news = cache.parsed, r.news
    assert news == 0  # a score never lets a pending pod fit
    cache.take_changes()
    cache.apply(rs, "MODIFIED", _replica_set("web", ready=2))  # status churn: dropped unparsed
    assert (cache.parsed, len(cache.take_changes())) == (parsed, 0)
    cache.apply(rs, "MODIFIED", _replica_set("shop"))
    selector = cache.state.replica_sets["default/web"].spec.selector
    assert selector is not None and selector.match_labels == {"app": "shop"}
    cache.apply(rs, "DELETED", _replica_set("shop"))
    assert cache.state.replica_sets == {} and r.news == 0


def test_a_cache_feeding_a_forked_session_process_keeps_json_only_for_what_it_has_not_sent() -> (
    None
):
    cache = Cache(["volcano"], kinds=[POD, NODE])
    cache.keep_json = "sent"
    cache.replace(NODE, [node("n1")])
    cache.replace(POD, [_uid(pod("a"), "ua"), _uid(pod("b"), "ub")])
    assert cache.synced.is_set()
    assert cache._json["pods"] == {}  # the listing: the forked process starts with it
    cache.forget_changes()  # the fork
    changed = _uid(pod("b"), "ub")
    changed["metadata"]["labels"] = {"new": "label"}
    cache.apply(POD, "MODIFIED", changed)
    cache.apply(POD, "ADDED", _uid(pod("c"), "uc"))
    cache.apply(POD, "DELETED", _uid(pod("a"), "ua"))
    stored, dropped = cache.take_changes().tables["pods"]
    assert sorted(stored) == ["default/b", "default/c"] and dropped == ["default/a"]
    assert b'"new":"label"' in stored["default/b"]
    assert cache._json["pods"] == {}  # sent: not kept


def test_a_cache_read_by_a_session_thread_keeps_no_json() -> None:
    cache = Cache(["volcano"], kinds=[POD, NODE])
    cache.keep_json = "none"
    cache.replace(NODE, [node("n1")])
    cache.replace(POD, [_uid(pod("a"), "ua")])
    cache.apply(POD, "ADDED", _uid(pod("c"), "uc"))
    assert cache._json["pods"] == {}
    assert cache.changed_pods() == {"default/a", "default/c"}


# -- JSON straight into records -------------------------------------------------------------------


def test_a_listed_pods_json_is_decoded_into_its_record_and_kept_as_it_came() -> None:
    r = Recorder()
    cache = r.cache()
    cache.keep_json = "all"
    text = orjson.dumps({"items": [_uid(pod("p")), _uid(pod("q"), "u2")]})
    items, _ = asyncio.run(
        list_json(_Reply(text), resource_of(POD), page=500, resource_version="0")
    )
    cache.replace(POD, items)
    held = cache.state.pods["default/p"]
    assert isinstance(held, Pod) and held.spec.scheduler_name == "volcano"
    stored, dropped = cache.take_changes().tables["pods"]
    assert orjson.loads(stored["default/q"]) == orjson.loads(bytes(items[1])) and not dropped


def test_a_malformed_pods_json_is_reported_with_the_field_and_left_out() -> None:
    r = Recorder()
    cache = r.cache()
    bad = _uid(pod("p"))
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    cache.apply(POD, "ADDED", memoryview(orjson.dumps(bad)))
    assert "default/p" not in cache.state.pods
    assert r.malformed == ["spec.containers[0].resources.requests: cpu: invalid quantity 'lots'"]


@pytest.mark.parametrize("kind", ["PriorityClass", "Namespace"])
def test_a_small_record_kind_is_news_only_when_more_than_its_version_changes(kind: str) -> None:
    r = Recorder()
    cache = r.cache()
    raw: dict[str, Any] = {"metadata": {"name": "x", "uid": "u", "resourceVersion": "1"}}
    if kind == "PriorityClass":
        raw["value"] = 10
    cache.apply(KINDS[kind], "ADDED", raw)
    news = r.news
    cache.apply(
        KINDS[kind], "MODIFIED", {**raw, "metadata": {**raw["metadata"], "resourceVersion": "2"}}
    )
    assert r.news == news
    raw["metadata"]["labels"] = {"team": "a"}
    cache.apply(KINDS[kind], "MODIFIED", raw)
    assert r.news == news + 1
    assert getattr(cache.state, KINDS[kind].table)["x"].metadata.labels == {"team": "a"}


def test_an_event_the_cache_cannot_take_is_logged_and_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    r = Recorder()
    cache = r.cache()
    assert cache.apply(POD, "ADDED", b"[1, 2]") is None  # JSON, but no object at all
    assert "skipping a Pod that is not an object" in caplog.text
    cache.apply(POD, "ADDED", _uid(pod("p")))
    assert "default/p" in cache.state.pods


def test_a_watch_objects_version_is_read_without_decoding_it_and_a_non_object_has_none() -> None:
    assert (
        resource_version(orjson.dumps(_uid(pod("p")) | {"metadata": {"resourceVersion": "7"}}))
        == "7"
    )
    assert resource_version(b"5") == ""


class _Reply:
    """A reader that answers every list with one page."""

    def __init__(self, text: bytes) -> None:
        self.text = text

    async def call_json(self, verb: str, resource: Any, **kw: Any) -> bytes:
        return self.text
