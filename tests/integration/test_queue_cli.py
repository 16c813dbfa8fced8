"""`caldera queue` against a cluster: ``list``/``get`` read it (the same answer as its exported
manifests), ``close``/``open`` write ``status.state`` as Volcano's queue controller would, and
Caldera's operator, the only controller running, ends a close: ``Closing`` while a PodGroup is
in the queue, ``Closed`` once none is."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from caldera.cli import main
from caldera.models.kinds import KINDS
from emulator.handles import K8sHandle
from integration.harness import node, pod, podgroup, queue, running_operator, wait_bound

CLOSED_BY_PARENT = "volcano.sh/closed-by-parent"


async def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``caldera queue ARGV`` in a thread (it runs its own event loop; the emulator serves this
    one)."""
    code = await asyncio.to_thread(main, ["queue", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


async def set_state(k8s: K8sHandle, name: str, state: str) -> None:
    await k8s.patch("queues", name, {"status": {"state": state}}, subresource="status")


async def state_of(k8s: K8sHandle, name: str) -> str:
    return str(((await k8s.get("queues", name)).get("status") or {}).get("state", ""))


async def test_queue_list_on_the_cluster_says_what_it_says_on_the_exported_manifests(
    k8s: K8sHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = k8s.namespace
    research = queue("research", weight=3)
    research["spec"].update(deserved={"cpu": "2"}, capability={"cpu": "4", "memory": "8Gi"})
    for q in (research, queue("nlp"), queue("default")):
        await k8s.create("queues", q)
    await k8s.patch("queues", "nlp", {"spec": {"parent": "research"}})
    await set_state(k8s, "research", "Open")
    await k8s.patch(
        "queues", "research", {"status": {"allocated": {"cpu": "1500m"}}}, subresource="status"
    )
    for name, phase in (("a", "Running"), ("b", "Running"), ("c", "Inqueue"), ("d", "Pending")):
        await k8s.create("podgroups", podgroup(name, 1, queue="research", namespace=ns))
        await k8s.patch(
            "podgroups", name, {"status": {"phase": phase}}, namespace=ns, subresource="status"
        )
    kubeconfig = str(k8s.kubeconfig_path)
    code, live, err = await cli(capsys, "list", "--kubeconfig", kubeconfig, "--output", "json")
    assert (code, err) == (0, "")
    docs = [
        {"apiVersion": KINDS[kind].api_version, "kind": kind, **item}
        for kind, plural in (("Queue", "queues"), ("PodGroup", "podgroups"))
        for item in await k8s.list(plural)
    ]
    exported = tmp_path / "cluster.yaml"
    exported.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs}))
    code, offline, _ = await cli(capsys, "list", str(exported), "--output", "json")
    assert code == 0
    assert json.loads(live) == json.loads(offline)
    row = next(r for r in json.loads(live) if r["name"] == "research")
    assert row["podGroups"] == {
        "inqueue": 1,
        "pending": 1,
        "running": 2,
        "unknown": 0,
        "completed": 0,
    }
    assert (row["allocated"], row["deserved"], row["capability"]) == (
        {"cpu": "1500m"},
        {"cpu": "2"},
        {"cpu": "4", "memory": "8Gi"},
    )
    code, out, _ = await cli(capsys, "get", "research", "--kubeconfig", kubeconfig)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["research", "nlp"]
    code, out, err = await cli(capsys, "get", "nope", "--kubeconfig", kubeconfig)
    assert (code, out) == (2, "")
    assert err == "caldera: queue nope not found in the cluster\n"


async def operator_looked(k8s: K8sHandle, capsys: pytest.CaptureFixture[str]) -> None:
    """Return once the operator has looked at the Closing queues since this was called: queue
    ``idle``, empty, is closed and waited for until Closed (the queues' watch is one ordered
    stream, and one look settles every queue that is Closing then), then opened again."""
    kubeconfig = str(k8s.kubeconfig_path)
    assert (await cli(capsys, "close", "idle", "--kubeconfig", kubeconfig))[0] == 0
    await k8s.wait_for("queues", "idle", lambda q: q["status"]["state"] == "Closed")
    assert (await cli(capsys, "open", "idle", "--kubeconfig", kubeconfig))[0] == 0


async def test_close_and_open_end_to_end_with_only_caldera_running(
    k8s: K8sHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = k8s.namespace
    kubeconfig = str(k8s.kubeconfig_path)
    await k8s.create("nodes", node("a", cpu="4"))
    await k8s.create("queues", queue("research"))
    await k8s.create("queues", queue("idle"))
    await k8s.create("podgroups", podgroup("train", 1, queue="research", namespace=ns))
    await k8s.create("pods", pod("train-0", group="train", namespace=ns), namespace=ns)
    async with running_operator(k8s):
        await wait_bound(k8s, "train-0")
        await k8s.wait_for("queues", "research", lambda q: q["status"]["state"] == "Open")

        # close: its job still runs, so the queue is Closing, and takes no new work
        code, out, err = await cli(capsys, "close", "research", "--kubeconfig", kubeconfig)
        assert (code, out, err) == (0, "queue research: Open -> Closing\n", "")
        await k8s.create("podgroups", podgroup("late", 1, queue="research", namespace=ns))
        await k8s.create("pods", pod("late-0", group="late", namespace=ns), namespace=ns)
        await k8s.wait_for(
            "pods",
            "late-0",
            lambda p: any(
                "queue research is Closing" in c.get("message", "")
                for c in (p.get("status") or {}).get("conditions", [])
            ),
            namespace=ns,
        )
        await operator_looked(k8s, capsys)
        assert await state_of(k8s, "research") == "Closing"
        code, out, _ = await cli(capsys, "close", "research", "--kubeconfig", kubeconfig)
        assert (code, out) == (0, "queue research is already Closing\n")

        # open: the waiting job goes
        code, out, _ = await cli(capsys, "open", "research", "--kubeconfig", kubeconfig)
        assert (code, out) == (0, "queue research: Closing -> Open\n")
        await wait_bound(k8s, "late-0")

        # close again; the jobs are deleted (pods and PodGroups): the operator marks it Closed
        code, _, _ = await cli(capsys, "close", "research", "--kubeconfig", kubeconfig)
        assert code == 0
        assert await state_of(k8s, "research") == "Closing"
        for name in ("train-0", "late-0"):
            await k8s.delete("pods", name, namespace=ns)
        await k8s.delete("podgroups", "train", namespace=ns)
        await operator_looked(k8s, capsys)
        assert await state_of(k8s, "research") == "Closing"  # "late" is still in it
        await k8s.delete("podgroups", "late", namespace=ns)
        await k8s.wait_for("queues", "research", lambda q: q["status"]["state"] == "Closed")

        code, out, _ = await cli(capsys, "open", "research", "--kubeconfig", kubeconfig)
        assert (code, out) == (0, "queue research: Closed -> Open\n")
        await k8s.wait_for("queues", "research", lambda q: q["status"]["state"] == "Open")


async def test_close_and_open_carry_down_the_hierarchy_as_volcanos_controller_does(
    k8s: K8sHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    """``closeHierarchicalQueue``/``openHierarchicalQueue``: a queue closes the open ones under
    it, marked closed by their parent; opening it opens those again, not one closed on its
    own; a child does not open under a shut parent; root does not close. No operator runs
    here: the states are the command's writes."""
    kubeconfig = str(k8s.kubeconfig_path)
    tree = {"root": "", "eng": "root", "ml": "eng", "ml-big": "ml", "web": "eng"}
    for name, parent in tree.items():
        q: dict[str, Any] = queue(name)
        if parent:
            q["spec"]["parent"] = parent
        await k8s.create("queues", q)
        await set_state(k8s, name, "Closed" if name == "web" else "Open")

    async def states() -> dict[str, tuple[str, str | None]]:
        out = {}
        for name in tree:
            obj = await k8s.get("queues", name)
            notes = obj["metadata"].get("annotations") or {}
            out[name] = (obj["status"]["state"], notes.get(CLOSED_BY_PARENT))
        return out

    code, out, _ = await cli(capsys, "close", "eng", "--kubeconfig", kubeconfig)
    assert code == 0
    assert out.splitlines() == [
        "queue eng: Open -> Closing",
        "queue ml: Open -> Closing",
        "queue ml-big: Open -> Closing",
    ]
    assert await states() == {
        "root": ("Open", None),
        "eng": ("Closing", None),
        "ml": ("Closing", "true"),
        "ml-big": ("Closing", "true"),
        "web": ("Closed", None),
    }
    code, out, err = await cli(capsys, "open", "ml", "--kubeconfig", kubeconfig)
    assert (code, out) == (2, "")
    assert err == (
        "caldera: queue ml cannot open while its parent queue eng is Closing: open eng first\n"
    )
    code, out, _ = await cli(capsys, "open", "eng", "--kubeconfig", kubeconfig)
    assert code == 0
    assert await states() == {
        "root": ("Open", None),
        "eng": ("Open", None),
        "ml": ("Open", "false"),
        "ml-big": ("Open", "false"),
        "web": ("Closed", None),
    }
    code, out, err = await cli(capsys, "close", "root", "--kubeconfig", kubeconfig)
    assert (code, out, err) == (2, "", "caldera: the root queue cannot be closed\n")
    code, out, err = await cli(capsys, "open", "nope", "--kubeconfig", kubeconfig)
    assert (code, out, err) == (2, "", "caldera: queue nope not found in the cluster\n")


def vcctl_command(queue_obj: dict[str, Any], action: str) -> dict[str, Any]:
    """The Command ``vcctl queue operate -a open|close`` creates (Volcano's
    ``createQueueCommand``): in ``default``, owned by the queue, naming it in ``target``."""
    ref = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "name": queue_obj["metadata"]["name"],
        "uid": queue_obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    name = f"{ref['name']}-{action.lower()}-x1"
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": name, "namespace": "default", "ownerReferences": [ref]},
        "target": ref,
        "action": action,
    }


async def test_vcctls_queue_commands_are_carried_out_and_deleted(k8s: K8sHandle) -> None:
    """``vcctl queue operate -a close`` then ``-a open`` against a cluster that runs only
    Caldera: the operator takes each Command as Volcano's queue controller does
    (``handleCommand``: deleted, then the queue closed or opened), so ``Closing`` → ``Closed``
    on an empty queue and back to ``Open``. A Command for anything but a queue is left
    alone."""
    k8s.needs_emulator("it serves the bus Command CRD")
    created = await k8s.create("queues", queue("batch"))
    stranger = vcctl_command(created, "CloseQueue")
    stranger["metadata"]["name"] = "a-job-command"
    stranger["target"] = {
        **stranger["target"],
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
    }
    async with running_operator(k8s):
        await k8s.wait_for(
            "queues", "batch", lambda q: (q.get("status") or {}).get("state") == "Open"
        )
        await k8s.create("commands", stranger, namespace="default")
        close = vcctl_command(created, "CloseQueue")
        await k8s.create("commands", close, namespace="default")
        await k8s.wait_for(
            "queues", "batch", lambda q: (q.get("status") or {}).get("state") == "Closed"
        )
        assert await k8s.find("commands", close["metadata"]["name"], "default") is None
        opened = vcctl_command(created, "OpenQueue")
        await k8s.create("commands", opened, namespace="default")
        await k8s.wait_for(
            "queues", "batch", lambda q: (q.get("status") or {}).get("state") == "Open"
        )
        assert await k8s.find("commands", opened["metadata"]["name"], "default") is None
    assert await k8s.find("commands", "a-job-command", "default") is not None


async def test_a_queue_made_under_a_closed_parent_closes_and_opens_with_it(
    k8s: K8sHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    """Volcano's ``syncHierarchicalQueue``: a queue created under a closed parent is closed by
    the operator, marked closed by its parent, and opens when the parent does."""
    kubeconfig = str(k8s.kubeconfig_path)
    await k8s.create("queues", queue("research"))
    async with running_operator(k8s):
        await k8s.wait_for(
            "queues", "research", lambda o: (o.get("status") or {}).get("state") == "Open"
        )
        assert (await cli(capsys, "close", "research", "--kubeconfig", kubeconfig))[0] == 0
        await k8s.wait_for("queues", "research", lambda o: o["status"]["state"] == "Closed")
        child = queue("nlp")
        child["spec"]["parent"] = "research"
        await k8s.create("queues", child)
        nlp = await k8s.wait_for(
            "queues", "nlp", lambda o: (o.get("status") or {}).get("state") == "Closed"
        )
        assert nlp["metadata"]["annotations"][CLOSED_BY_PARENT] == "true"
        assert (await cli(capsys, "open", "research", "--kubeconfig", kubeconfig))[0] == 0
        await k8s.wait_for("queues", "nlp", lambda o: o["status"]["state"] == "Open")
