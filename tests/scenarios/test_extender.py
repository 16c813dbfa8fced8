"""extender: Volcano's HTTP extender protocol (``pkg/scheduler/plugins/extender``:
``extenderPlugin.OnSessionOpen``'s hooks, ``send``, ``IsInterested``; its ``TestIsInterested``
cases), asked over real HTTP of the example server users start from
(``examples/extender/server.py``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import Obj, binds, node, pod, podgroup, policy, priority_class, queue, scenario
from caldera.cli import main
from caldera.errors import ConfigError
from caldera.framework.registry import Registry
from caldera.outside.http import HttpCaller
from caldera.simulate.runner import Simulation
from extender_example import running_extender
from loopback import reply, serving

BLOCKED = {"example.caldera.dev/blocked": "true"}
ALL = (
    "onSessionOpen",
    "onSessionClose",
    "predicate",
    "prioritize",
    "preemptable",
    "reclaimable",
    "queueOverused",
    "jobEnqueueable",
    "jobReady",
    "allocateFunc",
    "deallocateFunc",
)
DEAD = "http://127.0.0.1:9"
"""Nothing listens on the discard port: every call is refused at once."""


@pytest.fixture
def registry() -> Iterator[Registry]:
    reg = Registry.from_entry_points()
    caller = HttpCaller()
    reg.caller = caller
    yield reg
    caller.close()


@pytest.fixture
def extender() -> Iterator[tuple[str, Any]]:
    with running_extender() as running:
        yield running


def extender_policy(
    *entries: Mapping[str, Any], actions: str = "enqueue, allocate", first: tuple[str, ...] = ()
) -> str:
    """``first`` plugins, gang and one ``extender`` entry per argument map (its verbs as a list
    under ``verbs``, all of them by default) in the first tier; the resource fit in the second."""
    extenders = []
    for entry in entries:
        args = {k: v for k, v in entry.items() if k != "verbs"}
        args.update({f"extender.{v}Verb": v for v in entry.get("verbs", ALL)})
        extenders.append({"name": "extender", "arguments": args})
    tier = [*({"name": name} for name in (*first, "gang")), *extenders]
    doc = {"actions": actions, "tiers": [{"plugins": tier}, {"plugins": [{"name": "predicates"}]}]}
    text: str = yaml.safe_dump(doc, sort_keys=False)
    return text


def jobs(n: int, *, cpu: str = "1", **pod_args: Any) -> list[Obj]:
    out: list[Obj] = []
    for i in range(n):
        out += [podgroup(f"g{i}"), pod(f"p{i}", group=f"g{i}", cpu=cpu, **pod_args)]
    return out


def message(sim: Simulation, name: str) -> str:
    found = [c.message for rec in sim.cycles for c in rec.result.pod_conditions if c.name == name]
    assert found, f"no condition for {name}"
    return found[-1]


def calls(sim: Simulation) -> dict[str, int]:
    total: dict[str, int] = {}
    for rec in sim.cycles:
        for key, n in rec.result.calls.items():
            total[key] = total.get(key, 0) + n
    return total


# -- predicate and prioritize ----------------------------------------------------------------------


def test_a_node_the_extender_refuses_takes_no_pod(registry: Registry, extender: Any) -> None:
    url, _ = extender
    objs = [node("n1", cpu="8", labels=BLOCKED), node("n2", cpu="2"), *jobs(2)]
    sim = scenario(
        objs, policy_yaml=extender_policy({"extender.urlPrefix": url}), registry=registry
    )
    assert binds(sim) == {"default/p0": "n2", "default/p1": "n2"}


def test_when_the_extender_refuses_every_node_its_reason_is_the_pods_message(
    registry: Registry, extender: Any
) -> None:
    url, _ = extender
    objs = [node("n1", labels=BLOCKED), *jobs(1)]
    sim = scenario(
        objs, policy_yaml=extender_policy({"extender.urlPrefix": url}), registry=registry
    )
    assert binds(sim) == {}
    assert "node n1 is blocked by the example extender" in message(sim, "p0")


def test_the_extenders_scores_choose_the_node(registry: Registry, extender: Any) -> None:
    # the example scores a node by its idle cores: the biggest node wins
    url, _ = extender
    objs = [node("small", cpu="2"), node("big", cpu="16"), node("mid", cpu="4"), *jobs(1)]
    text = extender_policy({"extender.urlPrefix": url, "verbs": ["prioritize"]})
    assert binds(scenario(objs, policy_yaml=text, registry=registry)) == {"default/p0": "big"}


def test_calls_are_made_per_session_and_per_task_not_per_node(
    registry: Registry, extender: Any
) -> None:
    url, ext = extender
    objs = [*(node(f"n{i}", cpu="64") for i in range(20)), *jobs(10)]
    sim = scenario(
        objs, policy_yaml=extender_policy({"extender.urlPrefix": url}), registry=registry
    )
    assert len(binds(sim)) == 10
    counted = dict(ext.calls)
    assert counted["onSessionOpen"] == counted["onSessionClose"] == 1
    assert counted["prioritize"] == 10  # one call per task, with all 20 nodes in it
    assert counted["predicate"] == 10  # the best node passes at the first question
    assert counted["allocateFunc"] == 10
    assert sorted(ext.allocated) == [f"default/p{i}" for i in range(10)]
    assert calls(sim)["prioritize ok"] == 10


def test_a_managed_resource_limits_the_extender_to_the_pods_that_ask_for_it(
    registry: Registry, extender: Any
) -> None:
    url, ext = extender
    gpu_node = node("gpu", cpu="8", extra={"nvidia.com/gpu": "4"}, labels=BLOCKED)
    objs: list[Obj] = [
        gpu_node,
        node("plain", cpu="8", extra={"nvidia.com/gpu": "4"}),
        podgroup("cpu-job"),
        pod("cpu-pod", group="cpu-job", cpu="1"),
        podgroup("gpu-job"),
        pod("gpu-pod", group="gpu-job", cpu="1", extra={"nvidia.com/gpu": "1"}),
    ]
    args = {"extender.urlPrefix": url, "extender.managedResources": ["nvidia.com/gpu"]}
    sim = scenario(objs, policy_yaml=extender_policy(args), registry=registry)
    placed = binds(sim)
    assert placed["default/gpu-pod"] == "plain"  # asked: the blocked node is refused
    assert "default/cpu-pod" in placed  # not asked about at all
    assert ext.allocated == ["default/gpu-pod"]
    assert ext.calls["prioritize"] == 1


# -- failures --------------------------------------------------------------------------------------


def test_an_unreachable_ignorable_extender_is_skipped_with_one_log_line(
    registry: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    objs = [node("n1"), *jobs(3)]
    text = extender_policy({"extender.urlPrefix": DEAD, "extender.ignorable": True})
    with caplog.at_level(logging.WARNING, logger="caldera.plugins.extender"):
        sim = scenario(objs, policy_yaml=text, registry=registry, cycles=3)
    assert len(binds(sim)) == 3
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and DEAD in said[0] and "ignorable: true" in said[0], said
    assert calls(sim) == {"onSessionOpen failed": 3}  # one failed call a session, then no more


def test_a_failing_extender_is_said_once_and_its_recovery_once(
    registry: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    with running_extender(fail=frozenset({"predicate"})) as (url, ext):
        args = {"extender.urlPrefix": url, "extender.ignorable": True, "verbs": ["predicate"]}
        text = extender_policy(args)
        pending = [node("n1"), *jobs(1)]
        with caplog.at_level(logging.INFO, logger="caldera.plugins.extender"):
            assert binds(scenario(pending, policy_yaml=text, registry=registry))
            scenario([node("n1")], policy_yaml=text, registry=registry)  # asks nothing
            scenario(pending, policy_yaml=text, registry=registry)  # still failing: not said
            ext.failing.clear()
            scenario(pending, policy_yaml=text, registry=registry)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert "failed predicate with extender" in said[0] and "code 500" in said[0]
    assert said[1] == f"extender {url} answers again"


def test_an_unreachable_extender_that_is_not_ignorable_fails_what_it_was_asked(
    registry: Registry,
) -> None:
    objs = [node("n1"), *jobs(2)]
    sim = scenario(
        objs, policy_yaml=extender_policy({"extender.urlPrefix": DEAD}), registry=registry
    )
    assert binds(sim) == {}
    assert DEAD in message(sim, "p0") and "connection refused" in message(sim, "p0")
    assert calls(sim) == {"onSessionOpen failed": 1}


def test_an_extender_slower_than_its_timeout_is_given_up_on(registry: Registry) -> None:
    with running_extender(delay=0.3) as (url, _):
        args = {"extender.urlPrefix": url, "extender.httpTimeout": "50ms", "verbs": ["predicate"]}
        sim = scenario([node("n1"), *jobs(2)], policy_yaml=extender_policy(args), registry=registry)
        assert binds(sim) == {}
        assert "no answer within 50ms" in message(sim, "p0")
        assert calls(sim) == {"predicate failed": 1}  # not asked again this session

        ignorable = extender_policy({**args, "extender.ignorable": True})
        sim = scenario([node("n1"), *jobs(2)], policy_yaml=ignorable, registry=registry)
        assert len(binds(sim)) == 2


def test_an_answer_other_than_200_fails_the_decision_with_volcanos_message(
    registry: Registry,
) -> None:
    with running_extender(fail=frozenset({"prioritize"})) as (url, _):
        objs = [node("n1"), node("n2"), *jobs(1)]
        sim = scenario(
            objs, policy_yaml=extender_policy({"extender.urlPrefix": url}), registry=registry
        )
    assert binds(sim) == {}
    assert f"failed prioritize with extender at URL {url}/prioritize, code 500" in message(
        sim, "p0"
    )


def test_an_offline_run_treats_the_extender_as_unreachable() -> None:
    offline = Registry.from_entry_points()  # no HTTP client given
    objs = [node("n1"), *jobs(1)]
    sim = scenario(
        objs, policy_yaml=extender_policy({"extender.urlPrefix": DEAD}), registry=offline
    )
    assert "this run has no HTTP client" in message(sim, "p0")
    ignorable = extender_policy({"extender.urlPrefix": DEAD, "extender.ignorable": "true"})
    assert binds(scenario(objs, policy_yaml=ignorable, registry=offline)) == {"default/p0": "n1"}


# -- victims, jobs and queues ----------------------------------------------------------------------


def test_the_extender_keeps_a_protected_pod_from_being_preempted(
    registry: Registry, extender: Any
) -> None:
    url, ext = extender

    def run(protected: str, verbs: list[str]) -> list[str]:
        objs: list[Obj] = [
            node("n1", cpu="3"),
            priority_class("low", 10),
            priority_class("high", 1000),
            podgroup("low", phase="Running", priority_class="low"),
            *(
                pod(
                    name,
                    group="low",
                    node_name="n1",
                    priority_class="low",
                    phase="Running",
                    annotations={"example.caldera.dev/protected": "true"}
                    if name == protected
                    else None,
                )
                for name in ("a", "b", "c")
            ),
            podgroup("high", phase="Inqueue", priority_class="high"),
            pod("urgent", group="high", cpu="1", priority_class="high"),
        ]
        text = extender_policy(
            {"extender.urlPrefix": url, "verbs": verbs},
            actions="enqueue, allocate, preempt",
            first=("priority",),
        )
        sim = scenario(objs, policy_yaml=text, registry=registry)
        return [e.name for rec in sim.cycles for e in rec.result.evictions]

    (usual,) = run("", [])  # the victim priority and gang choose on their own
    (chosen,) = run(usual, ["preemptable"])
    assert chosen != usual
    assert ext.calls["preemptable"] >= 1


def full_node_and_a_preemptor(**node_args: Any) -> list[Obj]:
    """Node n1 (2 cpu) full of two low-priority pods, and a high-priority pod of 1 cpu."""
    return [
        node("n1", cpu="2", **node_args),
        priority_class("low", 10),
        priority_class("high", 1000),
        podgroup("low", phase="Running", priority_class="low"),
        *(
            pod(f"low-{i}", group="low", node_name="n1", priority_class="low", phase="Running")
            for i in range(2)
        ),
        podgroup("high", phase="Inqueue", priority_class="high"),
        pod("urgent", group="high", cpu="1", priority_class="high"),
    ]


def evictions(objs: list[Obj], registry: Registry, url: str, verbs: list[str]) -> int:
    """Pods evicted when ``preempt`` runs with an extender at ``url`` serving ``verbs``."""
    text = extender_policy(
        {"extender.urlPrefix": url, "verbs": verbs},
        actions="enqueue, allocate, preempt",
        first=("priority",),
    )
    sim = scenario(objs, policy_yaml=text, registry=registry)
    return sum(len(rec.result.evictions) for rec in sim.cycles)


def test_preemption_leaves_alone_a_node_the_extender_refuses_for_good(
    registry: Registry, extender: Any
) -> None:
    url, _ = extender
    objs = full_node_and_a_preemptor(labels=BLOCKED)
    assert evictions(objs, registry, url, []) == 1  # without its filter, a victim makes room
    assert evictions(objs, registry, url, ["predicate"]) == 0  # code 3: no eviction can help


class _Refusing(BaseHTTPRequestHandler):
    """An extender whose predicate refuses every node with the status code in its path's
    prefix (``/code2/predicate``)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        code = int(self.path.split("/")[1].removeprefix("code"))
        reply(self, json.dumps({"status": "the extender says no", "code": code}).encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("code", "victims"),
    [(2, 1), (0, 0), (1, 0), (3, 0), (4, 0), (5, 0)],
    ids=[
        "Unschedulable: evictions may cure it",
        "a message without a code counts as Error",
        "Error",
        "UnschedulableAndUnresolvable",
        "Wait",
        "Skip",
    ],
)
def test_only_an_unschedulable_refusal_leaves_the_node_to_preemption(
    registry: Registry, code: int, victims: int
) -> None:
    """Volcano's ``Session.PredicateForPreemptAction``: a node whose statuses hold
    ``UnschedulableAndUnresolvable``, ``Error``, ``Skip`` or ``Wait`` is no preemption
    candidate."""
    objs = full_node_and_a_preemptor()
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)) as url:
        found = evictions(objs, registry, f"{url}/code{code}", ["predicate"])
    assert found == victims


def test_a_job_the_extender_holds_is_not_enqueued(registry: Registry, extender: Any) -> None:
    url, _ = extender
    objs: list[Obj] = [
        node("n1"),
        podgroup(
            "held", min_resources={"cpu": "1"}, annotations={"example.caldera.dev/hold": "true"}
        ),
        pod("h", group="held"),
        podgroup("free", min_resources={"cpu": "1"}),
        pod("f", group="free"),
    ]
    text = extender_policy({"extender.urlPrefix": url, "verbs": ["jobEnqueueable"]})
    assert binds(scenario(objs, policy_yaml=text, registry=registry)) == {"default/f": "n1"}


def test_a_queue_the_extender_calls_overused_gets_nothing_more(
    registry: Registry, extender: Any
) -> None:
    url, _ = extender
    objs: list[Obj] = [
        node("n1"),
        queue("busy", annotations={"example.caldera.dev/overused": "true"}),
        podgroup("b", queue="busy", phase="Inqueue"),
        pod("b", group="b"),
        podgroup("d", phase="Inqueue"),
        pod("d", group="d"),
    ]
    text = extender_policy({"extender.urlPrefix": url, "verbs": ["queueOverused"]})
    assert binds(scenario(objs, policy_yaml=text, registry=registry)) == {"default/d": "n1"}


def test_two_extender_entries_are_two_extenders_each_asked(registry: Registry) -> None:
    with running_extender() as (first, one), running_extender() as (second, two):
        objs = [node("n1", labels=BLOCKED), node("n2"), *jobs(2)]
        text = extender_policy(
            {"extender.urlPrefix": first, "verbs": ["predicate"]},
            {"extender.urlPrefix": second, "verbs": ["prioritize", "allocateFunc"]},
        )
        sim = scenario(objs, policy_yaml=text, registry=registry)
    assert binds(sim) == {"default/p0": "n2", "default/p1": "n2"}
    assert one.calls["predicate"] >= 2 and "prioritize" not in one.calls
    assert two.calls["prioritize"] == 2 and len(two.allocated) == 2


# -- arguments -------------------------------------------------------------------------------------


def test_volcanos_argument_spellings_load() -> None:
    text = extender_policy(
        {
            "extender.urlPrefix": "http://x/",
            "extender.httpTimeout": "100ms",
            "extender.ignorable": "true",
            "extender.managedResources": "nvidia.com/gpu, example.com/fpga",
        }
    )
    (entry,) = [o for tier in policy(text).tiers for o in tier if o.name == "extender"]
    args: Any = entry.args
    assert args.timeout == pytest.approx(0.1) and args.ignorable is True
    assert args.managed_resources == {"nvidia.com/gpu", "example.com/fpga"}
    assert args.url("predicate") == "http://x/predicate"


def test_a_timeout_volcano_cannot_parse_keeps_one_second_and_is_said() -> None:
    text = extender_policy({"extender.urlPrefix": "http://x", "extender.httpTimeout": "soon"})
    with pytest.raises(ConfigError, match=r"extender\.httpTimeout"):
        policy(text)  # strict
    loaded = policy(text, strict=False)
    (entry,) = [o for tier in loaded.tiers for o in tier if o.name == "extender"]
    assert entry.args.timeout == 1.0  # type: ignore[attr-defined]
    assert any("httpTimeout" in str(w) for w in loaded.warnings)


def test_a_misspelt_extender_key_is_refused_by_name() -> None:
    text = extender_policy({"extender.urlPrefix": "http://x", "extender.predicatVerb": "p"})
    with pytest.raises(ConfigError, match=r"extender\.predicatVerb"):
        policy(text)


# -- the command line ------------------------------------------------------------------------------


def test_explain_asks_the_extender_and_lists_its_reason_per_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extender: Any
) -> None:
    url, _ = extender
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(extender_policy({"extender.urlPrefix": url}))
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        yaml.safe_dump_all(
            [
                {
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels},
                    "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
                }
                for name, cpu, labels in (("big", "8", BLOCKED), ("small", "2", {}))
            ]
            + [
                {
                    "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "default"},
                    "spec": {
                        "schedulerName": "volcano",
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                    },
                }
            ]
        )
    )
    argv = ["explain", "--output", "json", "--policy", str(policy_file), "default/p", str(cluster)]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "bound to small"
    assert doc["nodes"]["big"]["reasons"] == {
        "extender": ["node big is blocked by the example extender"]
    }
    assert doc["nodes"]["small"]["scores"]["extender"] == 2.0  # two idle cores


def test_the_guides_extender_policy_loads_as_written() -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "guide" / "extenders.md"
    block = guide.read_text().split("```yaml\n", 1)[1].split("```", 1)[0]
    loaded = policy(block)
    (entry,) = [o for tier in loaded.tiers for o in tier if o.name == "extender"]
    args: Any = entry.args
    assert args.timeout == pytest.approx(0.1)
    assert args.managed_resources == {"example.com/fpga"}


class _Busy(BaseHTTPRequestHandler):
    """An extender whose prioritize answers 200 with an error message instead of scores."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        reply(self, b'{"errorMessage": "busy, try later"}')

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_scores_refused_with_a_message_fail_the_pod_even_when_ignorable(
    registry: Registry,
) -> None:
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _Busy)) as url:
        args = {"extender.urlPrefix": url, "extender.ignorable": True, "verbs": ["prioritize"]}
        sim = scenario(
            [node("n1"), node("n2"), *jobs(1)], policy_yaml=extender_policy(args), registry=registry
        )
    assert binds(sim) == {}
    assert "extender prioritize: busy, try later" in message(sim, "p0")
