"""Shared GPUs end to end: the card assignment reaches the pod, in HAMi's encoding, before the
binding; the node lock is taken and, after a failed bind, released; nothing leaks."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from caldera.framework.policy import DEFAULT_POLICY_YAML
from caldera.k8s.nodelock import parse_lock
from emulator.handles import K8sHandle
from integration.harness import node, pod, running_operator, wait_bound

REGISTER = "hami.io/node-nvidia-register"
LOCK = "hami.io/mutex.lock"


def gpu_node(name: str, *uuids: str, memory: int = 16000) -> dict[str, Any]:
    obj = node(name)
    cards = [
        {"id": u, "index": i, "count": 10, "devmem": memory, "devcore": 100}
        | {"type": "NVIDIA-Tesla T4", "health": True}
        for i, u in enumerate(uuids)
    ]
    obj["metadata"]["annotations"] = {REGISTER: json.dumps(cards)}
    return obj


def gpu_pod(name: str, memory: str = "3000", cores: str = "30") -> dict[str, Any]:
    obj = pod(name)
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": memory, "nvidia.com/gpucores": cores}
    obj["spec"]["containers"][0]["resources"]["limits"] = limits
    return obj


def policy(tmp_path: Path, *, lock: bool) -> str:
    conf = tmp_path / "volcano-scheduler.conf"
    args = "      deviceshare.VGPUEnable: true\n"
    if lock:
        args += "      deviceshare.NodeLockEnable: true\n"
    conf.write_text(f"{DEFAULT_POLICY_YAML}  - name: deviceshare\n    arguments:\n{args}")
    return str(conf)


def writes_about(k8s: K8sHandle, name: str) -> list[tuple[str, str, str, str]]:
    return [
        (r.verb, r.resource, r.subresource, r.name)
        for r in k8s.requests
        if r.verb in ("patch", "create")
        and (r.name == name or r.resource == "nodes")
        and r.resource in ("pods", "nodes")
    ]


async def test_the_card_assignment_is_on_the_pod_before_it_is_bound(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    k8s.needs_emulator("it reads the order of the writes from the request log")
    await k8s.create("nodes", gpu_node("n1", "GPU-a", "GPU-b"))
    await k8s.create("pods", gpu_pod("train"), namespace="default")
    async with running_operator(k8s, scheduler_conf=policy(tmp_path, lock=False)):
        assert await wait_bound(k8s, "train") == {"train": "n1"}
    got = await k8s.get("pods", "train", namespace="default")
    ann = got["metadata"]["annotations"]
    # two idle cards: HAMi's walk takes the last registered
    assert ann["hami.io/vgpu-devices-to-allocate"] == "GPU-b,NVIDIA,3000,30:;"
    assert ann["hami.io/vgpu-devices-allocated"] == "GPU-b,NVIDIA,3000,30:;"
    assert ann["hami.io/vgpu-node"] == "n1"
    assert ann["hami.io/bind-phase"] == "allocating"
    assert ann["hami.io/bind-time"].isdigit() and ann["hami.io/vgpu-time"].isdigit()
    assert writes_about(k8s, "train") == [
        ("patch", "pods", "", "train"),
        ("create", "pods", "binding", "train"),
    ]


async def test_with_the_node_lock_the_lock_is_taken_before_the_pod_is_patched(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    k8s.needs_emulator("it reads the order of the writes from the request log")
    await k8s.create("nodes", gpu_node("n1", "GPU-a"))
    await k8s.create("pods", gpu_pod("train"), namespace="default")
    async with running_operator(k8s, scheduler_conf=policy(tmp_path, lock=True)):
        await wait_bound(k8s, "train")
    assert writes_about(k8s, "train") == [
        ("patch", "nodes", "", "n1"),
        ("patch", "pods", "", "train"),
        ("create", "pods", "binding", "train"),
    ]
    n1 = await k8s.get("nodes", "n1")
    when, namespace, name = parse_lock(n1["metadata"]["annotations"][LOCK])
    # held until HAMi's device plugin has handed the card over and clears it
    assert (namespace, name) == ("default", "train") and when is not None


async def test_a_failed_bind_releases_the_lock_and_the_pod_is_placed_again(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    k8s.needs_emulator("it makes the binding fail")
    await k8s.create("nodes", gpu_node("n1", "GPU-a", memory=4000))
    await k8s.create("pods", gpu_pod("train", memory="3000"), namespace="default")
    k8s.fail_next(500, verb="create", resource="pods", subresource="binding", times=1)
    async with running_operator(k8s, scheduler_conf=policy(tmp_path, lock=True)):
        assert await wait_bound(k8s, "train", timeout=30) == {"train": "n1"}
    bindings = k8s.find_requests(verb="create", subresource="binding", name="train")
    assert [b.status for b in bindings] == [500, 201]
    node_patches = [
        _json(r.body)["metadata"]["annotations"][LOCK]
        for r in k8s.find_requests(verb="patch", resource="nodes", name="n1")
    ]
    # taken, released after the failure, taken again: no stale lock and no leaked slot
    # (the 3000 MiB of the failed attempt did not block the second on a 4000 MiB card)
    assert [v is None for v in node_patches] == [False, True, False]
    got = await k8s.get("pods", "train", namespace="default")
    assert got["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] == (
        "GPU-a,NVIDIA,3000,30:;"
    )


async def test_a_lock_another_pod_holds_is_waited_for(k8s: K8sHandle, tmp_path: Path) -> None:
    k8s.needs_emulator("it plays HAMi's device plugin releasing the lock")
    other = await k8s.create("pods", pod("other"), namespace="default")
    n1 = gpu_node("n1", "GPU-a")
    n1["metadata"]["annotations"][LOCK] = f"{_now()},default,{other['metadata']['name']}"
    await k8s.create("nodes", n1)
    await k8s.create("pods", gpu_pod("train"), namespace="default")
    async with running_operator(k8s, scheduler_conf=policy(tmp_path, lock=True)):
        while not k8s.find_requests(verb="get", resource="nodes", name="n1"):
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # a few lock attempts
        bound = await k8s.get("pods", "train", namespace="default")
        assert not bound["spec"].get("nodeName")
        await k8s.patch("nodes", "n1", {"metadata": {"annotations": {LOCK: None}}})
        assert await wait_bound(k8s, "train", timeout=30) == {"train": "n1"}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json(body: Any) -> Any:
    return json.loads(body) if isinstance(body, (str, bytes)) else body


async def test_a_pod_the_device_plugin_failed_is_evicted_for_its_controller_to_replace(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    k8s.needs_emulator("it plays HAMi's device plugin failing the allocation")
    await k8s.create("nodes", gpu_node("n1", "GPU-a"))
    owned = gpu_pod("train")
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-1"}
        | {"controller": True}
    ]
    await k8s.create("pods", owned, namespace="default")
    await k8s.create("pods", gpu_pod("solo"), namespace="default")
    async with running_operator(k8s, scheduler_conf=policy(tmp_path, lock=False)):
        await wait_bound(k8s, "train", "solo")
        for name in ("train", "solo"):
            await k8s.patch(
                "pods",
                name,
                {"metadata": {"annotations": {"hami.io/bind-phase": "failed"}}},
                namespace="default",
            )
        while not k8s.find_requests(verb="delete", resource="pods", name="train"):
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
    # the owned pod goes (its controller makes a new one); the bare one is kept and told why
    assert not k8s.find_requests(verb="delete", resource="pods", name="solo")
    events = [
        e
        for e in await k8s.list("events", namespace="default")
        if e.get("reason") == "DeviceAllocationFailed"
    ]
    assert {e["involvedObject"]["name"] for e in events} == {"train", "solo"}
    solo = next(e for e in events if e["involvedObject"]["name"] == "solo")
    assert "delete it to schedule it again" in solo["message"]


async def test_a_session_counts_the_cards_of_a_bind_still_in_flight(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    k8s.needs_emulator("it holds one pod's annotation patch in flight")
    await k8s.create("nodes", gpu_node("n1", "GPU-a"))
    hold = k8s.hang_next(verb="patch", resource="pods", name="first")
    await k8s.create("pods", gpu_pod("first", memory="12000"), namespace="default")
    async with running_operator(k8s, scheduler_conf=policy(tmp_path, lock=False)):
        while not k8s.find_requests(verb="patch", resource="pods", name="first"):
            await asyncio.sleep(0.05)
        # first's cards are only in the scheduler's assumption: a second pod that would fit
        # the card only if they were free must wait, session after session. It is created in a
        # later second than first (timestamps have whole seconds), so that once both wait,
        # first is the older job and gets the card (a tie would go by the groups' UIDs)
        first = await k8s.get("pods", "first", namespace="default")
        created = datetime.fromisoformat(first["metadata"]["creationTimestamp"])
        while datetime.now(UTC) < created + timedelta(seconds=1):
            await asyncio.sleep(0.05)
        await k8s.create("pods", gpu_pod("second", memory="12000"), namespace="default")
        await asyncio.sleep(1.5)
        second = await k8s.get("pods", "second", namespace="default")
        assert not second["spec"].get("nodeName")
        assert not k8s.find_requests(verb="patch", resource="pods", subresource="", name="second")
        condition = next(c for c in second["status"]["conditions"] if c["type"] == "PodScheduled")
        assert "CardInsufficientMemory" in condition["message"]
        hold.release()
        assert await wait_bound(k8s, "first", timeout=30) == {"first": "n1"}


def mlu_node(name: str) -> dict[str, Any]:
    """A node with two MLUs as Cambricon's device plugin in sMLU mode publishes them."""
    obj = node(name)
    mlus = {
        "cambricon.com/vmlu": "2",
        "cambricon.com/mlu.smlu.vcore": "200",
        "cambricon.com/mlu.smlu.vmemory": "128",
    }
    obj["status"]["capacity"] = {**obj["status"].get("capacity", {}), **mlus}
    obj["status"]["allocatable"] = {**obj["status"].get("allocatable", {}), **mlus}
    return obj


def mlu_pod(name: str) -> dict[str, Any]:
    obj = pod(name)
    limits = {
        "cambricon.com/vmlu": "1",
        "cambricon.com/mlu.smlu.vmemory": "16",
        "cambricon.com/mlu.smlu.vcore": "25",
    }
    obj["spec"]["containers"][0]["resources"]["limits"] = limits
    return obj


async def test_an_mlu_pod_takes_cambricons_own_bare_node_lock_and_gets_its_smlu_profile(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    k8s.needs_emulator("it reads the order of the writes from the request log")
    await k8s.create("nodes", mlu_node("n1"))
    await k8s.create("pods", mlu_pod("infer"), namespace="default")
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(
        f"{DEFAULT_POLICY_YAML}  - name: deviceshare\n    arguments:\n"
        "      deviceshare.VGPUEnable: true\n      deviceshare.NodeLockEnable: true\n"
        "      deviceshare.Vendors: [cambricon]\n"
    )
    async with running_operator(k8s, scheduler_conf=str(conf)):
        assert await wait_bound(k8s, "infer") == {"infer": "n1"}
    assert writes_about(k8s, "infer") == [
        ("patch", "nodes", "", "n1"),
        ("patch", "pods", "", "infer"),
        ("create", "pods", "binding", "infer"),
    ]
    n1 = await k8s.get("nodes", "n1")
    annotations = n1["metadata"]["annotations"]
    # Cambricon's setNodeLock: the RFC 3339 time alone, under its own key
    held = annotations["cambricon.com/dsmlu.lock"]
    assert "," not in held and datetime.fromisoformat(held) <= datetime.now(UTC)
    assert LOCK not in annotations
    got = (await k8s.get("pods", "infer", namespace="default"))["metadata"]["annotations"]
    assert got["CAMBRICON_DSMLU_PROFILE"] == "1_25_16"
    assert got["hami.io/cambricon-mlu-devices-allocated"] == "n1-cambricon-mlu-1,MLU,4096,25:;"
