"""Volcano's admission rules, asked over HTTPS of the running webhook server as the API server
asks them: an AdmissionReview to the URL, with the CA bundle, that the webhook configurations
the operator wrote name.

One operator and one emulator serve the whole module (the rules only read the cluster). The
expected messages are Volcano's: ``pkg/webhooks/admission/queues/validate/validate_queue_test.go``
(``TestAdmitQueues``, ``TestAdmitHierarchicalQueues``), ``podgroups/validate``, ``pods/validate``
(``validateAnnotation``) and ``hypernodes/validate`` (``validateHyperNode``).
"""

from __future__ import annotations

import asyncio
import base64
import socket
import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from emulator import Emulator
from emulator.handles import EmulatorHandle, K8sHandle
from integration.harness import VOLCANO, node, pod, podgroup, running_operator
from integration.webhook_client import Answer, WebhookClient

GATE = "scheduling.volcano.sh/queue-allocation-gate"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def a_queue(
    name: str,
    *,
    parent: str | None = None,
    capability: dict[str, Any] | None = None,
    deserved: dict[str, Any] | None = None,
    guarantee: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    state: str | None = None,
    weight: int | None = 1,
    reclaimable: bool | None = True,
) -> dict[str, Any]:
    given = {
        "weight": weight,
        "reclaimable": reclaimable,
        "parent": parent,
        "capability": capability,
        "deserved": deserved,
    }
    spec: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
    if guarantee is not None:
        spec["guarantee"] = {"resource": guarantee}
    obj: dict[str, Any] = {
        "apiVersion": f"{VOLCANO}/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": spec,
    }
    if state is not None:
        obj["status"] = {"state": state}
    return obj


def hypernode(*members: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "s0"},
        "spec": {"tier": 1, "members": list(members)},
    }


@dataclass
class Served:
    """The running operator's webhooks, as the API server knows them, and its cluster."""

    urls: dict[str, str]
    ca: bytes
    k8s: K8sHandle
    loop: asyncio.AbstractEventLoop

    def client(self) -> WebhookClient:
        return WebhookClient(self.urls, self.ca)

    def in_cluster(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the operator's loop (where the emulator handle lives)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)


T = TypeVar("T")


async def _seed(k8s: K8sHandle) -> None:
    await k8s.create(
        "namespaces",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": "team-a",
                "annotations": {"scheduling.volcano.sh/queue-name": "open-q"},
            },
        },
    )
    await k8s.create("nodes", node("n1"))
    for obj in (
        a_queue("open-q"),
        a_queue("closed-q"),
        a_queue("busy-q"),
        a_queue(
            "parent-q",
            capability={"cpu": "10", "memory": "20Gi"},
            deserved={"cpu": "10", "memory": "20Gi"},
            guarantee={"cpu": "8", "memory": "16Gi"},
        ),
        a_queue(
            "sibling-q",
            parent="parent-q",
            capability={"cpu": "5"},
            deserved={"cpu": "2", "memory": "4Gi"},
            guarantee={"cpu": "2", "memory": "4Gi"},
        ),
        a_queue(
            "h-q",
            annotations={
                "volcano.sh/hierarchy": "root/eng/prod",
                "volcano.sh/hierarchy-weights": "1/2/3",
            },
        ),
        a_queue("d1"),
        a_queue("d2", parent="d1"),
        a_queue("d3", parent="d2"),
        a_queue("d4", parent="d3"),
        a_queue("d5", parent="d4"),
    ):
        await k8s.create("queues", obj)
    closed = await k8s.get("queues", "closed-q")
    closed["status"] = {"state": "Closed"}
    await k8s.update_status("queues", closed)
    await k8s.create("podgroups", podgroup("in-open", 1, queue="open-q"), namespace="default")
    await k8s.create("podgroups", podgroup("in-closed", 1, queue="closed-q"), namespace="default")
    running = pod("busy-0", annotations={"scheduling.volcano.sh/queue-name": "busy-q"})
    running["spec"]["nodeName"] = "n1"
    await k8s.create("pods", running, namespace="default")


class _Background:
    """The emulator and the operator on an event loop of their own, in a thread, for the whole
    module: the tests only send requests, so they need not share its loop."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ready = threading.Event()
        self.served: Served | None = None
        self.failure: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=self._run, name="webhook-operator", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: BLE001 -- reported by the fixture
            self.failure = exc
            self.ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        emulator = Emulator()
        await emulator.start()
        k8s = EmulatorHandle(emulator, self.folder / "kubeconfig")
        try:
            await _seed(k8s)
            port = free_port()
            async with running_operator(
                k8s,
                enabled_admission="all",
                webhook_port=port,
                webhook_url=f"https://127.0.0.1:{port}",
                webhook_namespace="default",
            ) as runtime:
                assert runtime.webhook_server is not None
                await asyncio.wait_for(runtime.webhook_server.serving.wait(), 20)
                await k8s.wait_for(
                    "mutatingwebhookconfigurations", "caldera-scheduler", lambda o: True
                )
                await k8s.wait_for(
                    "queues", "closed-q", lambda o: o["spec"].get("parent") == "root"
                )
                urls, ca = await WebhookClient.configured(k8s)
                self.served = Served(urls, ca, k8s, self._loop)
                self.ready.set()
                await self._stop.wait()
        finally:
            await emulator.stop()

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(timeout=30)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    background = _Background(Path(tmp_path_factory.mktemp("webhooks")))
    background.thread.start()
    try:
        assert background.ready.wait(timeout=60), "the operator did not start"
        if background.failure is not None:
            raise background.failure
        assert background.served is not None
        yield background.served
    finally:
        background.stop()


@dataclass(frozen=True)
class Case:
    says: str
    path: str
    operation: str
    obj: dict[str, Any] | None
    message: str = ""
    """The refusal's message; empty: allowed."""
    old: dict[str, Any] | None = None
    patch: tuple[tuple[str, str, Any], ...] = ()
    """(op, path, value) the answer's JSONPatch holds (mutating webhooks)."""


def _queue_cases() -> list[Case]:
    v = "/queues/validate"
    return [
        Case(
            "a queue without weight or reclaimable gets weight 1 and reclaimable true",
            "/queues/mutate",
            "CREATE",
            a_queue("fresh", weight=None, reclaimable=None),
            patch=(("add", "/spec/weight", 1), ("add", "/spec/reclaimable", True)),
        ),
        Case(
            "a hierarchy that does not start at root is put under root, weight 1",
            "/queues/mutate",
            "CREATE",
            a_queue(
                "h2",
                annotations={"volcano.sh/hierarchy": "a/b", "volcano.sh/hierarchy-weights": "2/3"},
            ),
            patch=(
                ("replace", "/metadata/annotations/volcano.sh~1hierarchy", "root/a/b"),
                ("replace", "/metadata/annotations/volcano.sh~1hierarchy-weights", "1/2/3"),
            ),
        ),
        Case("a plain queue is accepted", v, "CREATE", a_queue("plain")),
        Case(
            "a queue with a state other than Open or Closed is refused",
            v,
            "CREATE",
            a_queue("wrong", state="wrong"),
            'requestBody.spec.state: Invalid value: "wrong": queue state must be in [Open Closed]',
        ),
        Case(
            "a guarantee with no deserved for its resource is refused",
            v,
            "CREATE",
            a_queue("g", guarantee={"cpu": "1"}),
            'requestBody.spec.deserved.cpu: Invalid value: "<nil>": '
            "deserved[cpu] must be >= guarantee[cpu]=1",
        ),
        Case(
            "a deserved above the capability is refused",
            v,
            "CREATE",
            a_queue(
                "d",
                capability={"cpu": "1", "memory": "1Gi"},
                deserved={"cpu": "2", "memory": "1Gi"},
            ),
            'requestBody.spec.deserved.cpu: Invalid value: "2": deserved[cpu]=2 must be <= '
            "capability[cpu]=1",
        ),
        Case(
            "a deserved below the guarantee is refused",
            v,
            "CREATE",
            a_queue(
                "dg",
                deserved={"cpu": "2", "memory": "1Gi"},
                guarantee={"cpu": "2", "memory": "3Gi"},
            ),
            'requestBody.spec.deserved.memory: Invalid value: "1Gi": deserved[memory]=1Gi must '
            "be >= guarantee[memory]=3Gi",
        ),
        Case(
            "a negative capability is refused",
            v,
            "CREATE",
            a_queue("neg", capability={"cpu": "-10"}),
            'requestBody.spec.capability.cpu: Invalid value: "-10": must be greater than or '
            "equal to 0",
        ),
        Case(
            "every error of the fields is reported at once",
            v,
            "CREATE",
            a_queue("neg2", guarantee={"cpu": "-2"}),
            '[requestBody.spec.guarantee.resource.cpu: Invalid value: "-2": must be greater than '
            'or equal to 0, requestBody.spec.deserved.cpu: Invalid value: "<nil>": deserved[cpu] '
            "must be >= guarantee[cpu]=-2]",
        ),
        Case(
            "a hierarchy with more levels than weights is refused",
            v,
            "CREATE",
            a_queue(
                "hw",
                annotations={
                    "volcano.sh/hierarchy": "root/a/b",
                    "volcano.sh/hierarchy-weights": "1/2/3/4",
                },
            ),
            'requestBody.metadata.annotations: Invalid value: "root/a/b": volcano.sh/hierarchy '
            "must have the same length with volcano.sh/hierarchy-weights",
        ),
        Case(
            "a negative hierarchy weight is refused",
            v,
            "CREATE",
            a_queue(
                "hn",
                annotations={
                    "volcano.sh/hierarchy": "root/a/b",
                    "volcano.sh/hierarchy-weights": "1/-1/3",
                },
            ),
            'requestBody.metadata.annotations: Invalid value: "1/-1/3": -1 in the 1/-1/3 must '
            "be larger than 0",
        ),
        Case(
            "a hierarchy weight that is not a number is refused",
            v,
            "CREATE",
            a_queue(
                "hx",
                annotations={
                    "volcano.sh/hierarchy": "root/a/b",
                    "volcano.sh/hierarchy-weights": "1/a/3",
                },
            ),
            'requestBody.metadata.annotations: Invalid value: "1/a/3": a in the 1/a/3 is invalid '
            'number: strconv.ParseFloat: parsing "a": invalid syntax',
        ),
        Case(
            "a hierarchy above another queue's is refused",
            v,
            "CREATE",
            a_queue(
                "hs",
                annotations={
                    "volcano.sh/hierarchy": "root/eng",
                    "volcano.sh/hierarchy-weights": "1/2",
                },
            ),
            'requestBody.metadata.annotations: Invalid value: "root/eng": root/eng is not allowed '
            "to be in the sub path of root/eng/prod of queue h-q",
        ),
        Case(
            "a hierarchy that only shares a prefix of letters is accepted",
            v,
            "CREATE",
            a_queue(
                "hp",
                annotations={
                    "volcano.sh/hierarchy": "root/en",
                    "volcano.sh/hierarchy-weights": "1/2",
                },
            ),
        ),
        Case(
            "a queue cannot be its own parent",
            v,
            "CREATE",
            a_queue("selfish", parent="selfish"),
            "queue selfish cannot use itself as parent",
        ),
        Case(
            "a queue deeper than --max-queue-depth is refused",
            v,
            "CREATE",
            a_queue("d6", parent="d5"),
            "queue d6 exceeds the maximum allowed depth of 5",
        ),
        Case(
            "a queue at the deepest level allowed is accepted",
            v,
            "CREATE",
            a_queue("d5b", parent="d4"),
        ),
        Case(
            "a parent that does not exist is refused",
            v,
            "CREATE",
            a_queue("orphan", parent="nope"),
            'failed to get parent queue nope of queue orphan: queue.scheduling.volcano.sh "nope" '
            "not found",
        ),
        Case(
            "a leaf queue whose pods are running cannot become a parent",
            v,
            "CREATE",
            a_queue("kid", parent="busy-q"),
            "queue busy-q cannot be the parent queue of queue kid because it has allocated Pods: 1",
        ),
        Case(
            "a child's capability above its ancestor's is refused",
            v,
            "CREATE",
            a_queue("big-kid", parent="parent-q", capability={"cpu": "20", "memory": "40Gi"}),
            "queue big-kid capability[cpu]=20 exceeds its ancestor's capability=10",
        ),
        Case(
            "children's guarantees above the parent's are refused",
            v,
            "CREATE",
            a_queue(
                "greedy",
                parent="parent-q",
                deserved={"cpu": "7", "memory": "14Gi"},
                guarantee={"cpu": "7", "memory": "14Gi"},
            ),
            "parent queue parent-q validation failed: sum of children's guarantee (cpu 9000.00, "
            "memory 19327352832.00) exceeds parent's guarantee limit (cpu 8000.00, memory "
            "17179869184.00)",
        ),
        Case(
            "a child within its parent's guarantee is accepted",
            v,
            "CREATE",
            a_queue(
                "modest",
                parent="parent-q",
                deserved={"cpu": "6", "memory": "12Gi"},
                guarantee={"cpu": "6", "memory": "12Gi"},
            ),
        ),
        Case(
            "a parent's capability below a child's is refused on update",
            v,
            "UPDATE",
            a_queue(
                "parent-q",
                parent="root",
                capability={"cpu": "4", "memory": "20Gi"},
                deserved={"cpu": "4", "memory": "20Gi"},
                guarantee={"cpu": "4", "memory": "16Gi"},
            ),
            "queue parent-q capability[cpu]=4 is smaller than its descendants' max capability=5",
            old=a_queue(
                "parent-q",
                parent="root",
                capability={"cpu": "10", "memory": "20Gi"},
                deserved={"cpu": "10", "memory": "20Gi"},
                guarantee={"cpu": "8", "memory": "16Gi"},
            ),
        ),
        Case(
            "the root queue's resources cannot change",
            v,
            "UPDATE",
            a_queue("root", capability={"cpu": "100"}),
            "root queue's resource attributes (capability, deserved, guarantee) cannot be modified",
            old=a_queue("root"),
        ),
        Case(
            "the root queue's weight may change",
            v,
            "UPDATE",
            a_queue("root", weight=3),
            old=a_queue("root"),
        ),
        Case(
            "the default queue cannot be deleted",
            v,
            "DELETE",
            None,
            "`default` queue can not be deleted",
            old=a_queue("default"),
        ),
        Case(
            "the root queue cannot be deleted",
            v,
            "DELETE",
            None,
            "`root` queue can not be deleted",
            old=a_queue("root"),
        ),
        Case(
            "a queue with children cannot be deleted",
            v,
            "DELETE",
            None,
            "queue parent-q can not be deleted because it has 1 child queues: sibling-q",
            old=a_queue("parent-q"),
        ),
        Case("a leaf queue can be deleted", v, "DELETE", None, old=a_queue("open-q")),
    ]


def _podgroup(name: str, queue: str = "", namespace: str = "team-a", **spec: Any) -> dict[str, Any]:
    obj = podgroup(name, 1, queue=queue, namespace=namespace)
    if not queue:
        del obj["spec"]["queue"]
    obj["spec"].update(spec)
    return obj


def _podgroup_cases() -> list[Case]:
    v = "/podgroups/validate"
    return [
        Case(
            "a PodGroup in the default queue goes to its namespace's queue",
            "/podgroups/mutate",
            "CREATE",
            _podgroup("pg", "default"),
            patch=(("replace", "/spec/queue", "open-q"),),
        ),
        Case(
            "a PodGroup naming no queue gets the default one",
            "/podgroups/mutate",
            "CREATE",
            _podgroup("pg", namespace="default"),
            patch=(("add", "/spec/queue", "default"),),
        ),
        Case(
            "a PodGroup naming its queue keeps it",
            "/podgroups/mutate",
            "CREATE",
            _podgroup("pg", "closed-q"),
        ),
        Case("a PodGroup in an open queue is accepted", v, "CREATE", _podgroup("pg", "open-q")),
        Case(
            "a PodGroup in a closed queue is refused",
            v,
            "CREATE",
            _podgroup("pg", "closed-q"),
            "can only submit PodGroup to queue with state `Open`, queue `closed-q` status is "
            "`Closed`.",
        ),
        Case(
            "a PodGroup in a queue that does not exist is refused",
            v,
            "CREATE",
            _podgroup("pg", "ghost"),
            'unable to find queue: queue.scheduling.volcano.sh "ghost" not found.',
        ),
        Case(
            "a network topology naming its highest tier twice is refused",
            v,
            "CREATE",
            _podgroup(
                "pg",
                "open-q",
                networkTopology={"mode": "hard", "highestTierAllowed": 2, "highestTierName": "s"},
            ),
            "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology "
            "simultaneously.",
        ),
    ]


def _pod(
    annotations: dict[str, str] | None = None, *, scheduler: str = "volcano", **spec: Any
) -> dict[str, Any]:
    obj = pod("p", namespace="default", scheduler=scheduler, annotations=annotations)
    obj["spec"].update(spec)
    return obj


def _pod_cases() -> list[Case]:
    v = "/pods/validate"
    jdb = "volcano.sh/jdb-min-available"
    return [
        Case("a plain pod of ours is accepted", v, "CREATE", _pod()),
        Case(
            "a budget of another scheduler's pod is not checked",
            v,
            "CREATE",
            _pod({jdb: "0"}, scheduler="default-scheduler"),
        ),
        Case(
            "a budget of zero pods is refused",
            v,
            "CREATE",
            _pod({jdb: "0"}),
            'invalid value <"0"> for volcano.sh/jdb-min-available, it must be a positive integer',
        ),
        Case(
            "a budget of 100% is refused",
            v,
            "CREATE",
            _pod({"volcano.sh/jdb-max-unavailable": "100%"}),
            'invalid value <"100%"> for volcano.sh/jdb-max-unavailable, it must be a valid '
            "percentage which between 1% ~ 99%",
        ),
        Case(
            "a budget that is not a number is refused",
            v,
            "CREATE",
            _pod({jdb: "abc"}),
            'invalid value strconv.Atoi: parsing "abc": invalid syntax for '
            "volcano.sh/jdb-min-available",
        ),
        Case(
            "both budgets at once are refused",
            v,
            "CREATE",
            _pod({jdb: "2", "volcano.sh/jdb-max-unavailable": "10%"}),
            "not allow configure multiple annotations <[volcano.sh/jdb-min-available "
            "volcano.sh/jdb-max-unavailable]> at same time",
        ),
        Case("a budget of 50% is accepted", v, "CREATE", _pod({jdb: "50%"})),
        Case(
            "a pod of a PodGroup that does not exist is refused",
            v,
            "CREATE",
            _pod({"scheduling.k8s.io/group-name": "ghost"}),
            'failed to get PodGroup for pod <default/p>: podgroups.scheduling.volcano.sh "ghost" '
            "not found",
        ),
        Case(
            "a pod of a PodGroup in a closed queue is refused",
            v,
            "CREATE",
            _pod({"scheduling.k8s.io/group-name": "in-closed"}),
            "failed :  can only submit job to queue with state `Open`, queue `closed-q` status "
            "is `Closed`;;",
        ),
        Case(
            "a pod of a PodGroup in an open queue is accepted",
            v,
            "CREATE",
            _pod({"scheduling.k8s.io/group-name": "in-open"}),
        ),
        Case(
            "a pod naming a closed queue is refused",
            v,
            "CREATE",
            _pod({"scheduling.volcano.sh/queue-name": "closed-q"}),
            "can only submit job to queue with state `Open`, queue `closed-q` status is `Closed`;",
        ),
        Case(
            "a pod that asks for the queue-allocation gate gets it",
            "/pods/mutate",
            "CREATE",
            _pod({GATE: "true"}),
            patch=(("add", "/spec/schedulingGates", [{"name": GATE}]),),
        ),
        Case(
            "the gate joins the pod's other gates",
            "/pods/mutate",
            "CREATE",
            _pod({GATE: "true"}, schedulingGates=[{"name": "example.com/other"}]),
            patch=(("add", "/spec/schedulingGates/1", {"name": GATE}),),
        ),
        Case("a pod that does not ask gets no gate", "/pods/mutate", "CREATE", _pod()),
        Case(
            "another scheduler's pod gets no gate",
            "/pods/mutate",
            "CREATE",
            _pod({GATE: "true"}, scheduler="default-scheduler"),
        ),
    ]


def _hypernode_cases() -> list[Case]:
    v = "/hypernodes/validate"
    exact = {"exactMatch": {"name": "n1"}}
    return [
        Case(
            "a hypernode of nodes is accepted",
            v,
            "CREATE",
            hypernode({"type": "Node", "selector": exact}),
        ),
        Case(
            "a member of an unknown type is refused",
            v,
            "CREATE",
            hypernode({"type": "Rack", "selector": exact}),
            '[].spec.members.type: Invalid value: "Rack": unknown member type Rack',
        ),
        Case(
            "a member without a selector is refused",
            v,
            "CREATE",
            hypernode({"type": "Node", "selector": {}}),
            "[].spec.members.selector: Invalid value: {}: member selector must have one of "
            "regexMatch or exactMatch",
        ),
        Case(
            "a member with a pattern that does not compile is refused",
            v,
            "UPDATE",
            hypernode({"type": "Node", "selector": {"regexMatch": {"pattern": "n(["}}}),
            '[].spec.members.selector.regexMatch.pattern: Invalid value: "n([": member '
            "regexMatch pattern is invalid: error parsing regexp:",
            old=hypernode({"type": "Node", "selector": exact}),
        ),
    ]


CASES = _queue_cases() + _podgroup_cases() + _pod_cases() + _hypernode_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.says for c in CASES])
async def test_each_rule_answers_as_volcano_does(served: Served, case: Case) -> None:
    client = served.client()
    try:
        answer: Answer = await client.send(case.path, case.operation, case.obj, old=case.old)
    finally:
        await client.close()
    if case.message:
        assert not answer.allowed
        assert answer.message.startswith(case.message), answer.message
        if not case.message.endswith("regexp:"):
            assert answer.message == case.message
    else:
        assert answer.allowed, answer.message
    assert {(op["op"], op["path"]): op.get("value") for op in answer.patch} == {
        (op, path): value for op, path, value in case.patch
    }


def test_the_configurations_route_every_webhook_as_volcanos_chart_does(served: Served) -> None:
    validating = served.in_cluster(
        served.k8s.get("validatingwebhookconfigurations", "caldera-scheduler")
    )
    mutating = served.in_cluster(
        served.k8s.get("mutatingwebhookconfigurations", "caldera-scheduler")
    )
    by_name = {w["name"]: w for w in validating["webhooks"] + mutating["webhooks"]}
    assert set(by_name) == {
        "mutatequeue.volcano.sh",
        "validatequeue.volcano.sh",
        "mutatepodgroup.volcano.sh",
        "validatepodgroup.volcano.sh",
        "mutatepod.volcano.sh",
        "validatepod.volcano.sh",
        "validatehypernodes.volcano.sh",
    }
    assert {w["name"] for w in mutating["webhooks"]} == {
        "mutatequeue.volcano.sh",
        "mutatepodgroup.volcano.sh",
        "mutatepod.volcano.sh",
    }
    queue = by_name["validatequeue.volcano.sh"]
    assert queue["clientConfig"]["url"].endswith("/queues/validate")
    assert queue["rules"] == [
        {
            "apiGroups": ["scheduling.volcano.sh"],
            "apiVersions": ["v1beta1"],
            "resources": ["queues"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "scope": "*",
        }
    ]
    assert {w["failurePolicy"] for w in by_name.values()} == {"Fail"}
    pods = by_name["validatepod.volcano.sh"]
    assert pods["rules"][0]["operations"] == ["CREATE"]
    assert pods["namespaceSelector"]["matchExpressions"] == [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["default", "kube-system"],
        }
    ]
    assert "namespaceSelector" not in by_name["validatehypernodes.volcano.sh"]  # cluster-scoped
    assert "namespaceSelector" not in by_name["validatequeue.volcano.sh"]
    secret = served.in_cluster(served.k8s.get("secrets", "caldera-webhook-tls", "default"))
    assert secret["type"] == "kubernetes.io/tls"
    assert base64.b64decode(secret["data"]["tls.crt"]) == served.ca


async def test_a_refused_budget_is_recorded_as_an_admit_warning_but_not_on_a_dry_run(
    served: Served,
) -> None:
    client = served.client()
    try:
        bad = _pod({"volcano.sh/jdb-max-unavailable": "0"})
        bad["metadata"]["name"] = "budget-wet"
        await client.send("/pods/validate", "CREATE", bad)
        bad["metadata"]["name"] = "budget-dry"
        await client.send("/pods/validate", "CREATE", bad, dry_run=True)
        both = _pod({"volcano.sh/jdb-max-unavailable": "1", "volcano.sh/jdb-min-available": "1"})
        both["metadata"]["name"] = "budget-both"  # refused, but recordEvent is not called
        await client.send("/pods/validate", "CREATE", both)
    finally:
        await client.close()

    async def admit_events() -> list[dict[str, Any]]:
        def about_these(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [
                e
                for e in events
                if e.get("reason") == "Admit"
                and e["involvedObject"]["name"] in ("budget-wet", "budget-dry", "budget-both")
            ]

        for _ in range(50):
            if about_these(await served.k8s.list("events", "default")):
                await asyncio.sleep(0.2)  # a dry run's event would be posted by now too
                return about_these(await served.k8s.list("events", "default"))
            await asyncio.sleep(0.1)
        return []

    events = served.in_cluster(admit_events())
    assert [(e["type"], e["involvedObject"]["name"]) for e in events] == [("Warning", "budget-wet")]
    assert events[0]["message"] == (
        'Create pod failed due to invalid value <"0"> for volcano.sh/jdb-max-unavailable, '
        "it must be a positive integer"
    )


async def test_an_object_created_a_moment_before_is_found_though_the_cache_lags(
    served: Served,
) -> None:
    async def create_then_ask() -> Answer:
        await served.k8s.create("queues", a_queue("just-made"))
        client = served.client()
        try:
            return await client.send("/podgroups/validate", "CREATE", _podgroup("pg", "just-made"))
        finally:
            await client.close()

    answer = served.in_cluster(create_then_ask())
    assert answer.allowed, answer.message
