"""The extender plugin's parts: ``IsInterested`` (Volcano's ``TestIsInterested`` cases), the HTTP
client's limits (``TestMaxBodySizeLimit2``: a larger answer is an error) and the wire names."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from builders import engine_task, node, open_session, pod, podgroup, policy_text
from caldera.api.resources import ResourceSpace
from caldera.framework.outside import MAX_BODY, CallError, Unreachable
from caldera.framework.plugin import PluginOption
from caldera.outside.http import HttpCaller
from caldera.plugins.extender import ExtenderArgs, ExtenderPlugin
from caldera.plugins.extender.wire import Wire, body
from loopback import reply, serving

GPU = "nvidia.com/gpu"
SPACE = ResourceSpace([GPU, "amd.com/gpu"])


def interested(managed: list[str], **pod_args: Any) -> bool:
    args = ExtenderArgs.model_validate({"extender.managedResources": managed})
    plugin = ExtenderPlugin(args, PluginOption("extender", args))
    plugin._interest = {}
    task = replace(engine_task(SPACE, "t"), spec=pod("t", **pod_args).spec)
    return plugin.interested(task)


@pytest.mark.parametrize(
    ("managed", "pod_args", "expected"),
    [
        ([], {"cpu": "100m"}, True),
        ([GPU], {"cpu": "100m", "extra": {GPU: "1"}}, True),
        ([GPU], {"cpu": None, "memory": None, "limits": {GPU: "1"}}, True),
        (
            [GPU],
            {
                "cpu": "100m",
                "init_containers": [{"name": "i", "resources": {"requests": {GPU: "1"}}}],
            },
            True,
        ),
        ([GPU], {"cpu": "100m", "memory": "128Mi"}, False),
        ([GPU, "amd.com/gpu"], {"cpu": "100m", "extra": {"amd.com/gpu": "1"}}, True),
    ],
    ids=[
        "empty managed resources: every task",
        "a managed resource in requests",
        "a managed resource in limits",
        "a managed resource in an init container",
        "no managed resource",
        "one of several managed resources",
    ],
)
def test_a_task_interests_the_extender_as_volcanos_is_interested_says(
    managed: list[str], pod_args: dict[str, Any], expected: bool
) -> None:
    assert interested(managed, **pod_args) is expected


class _Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        size = MAX_BODY + 1 if self.path == "/big" else 2
        reply(self, b"{" + b" " * (size - 2) + b"}")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _Answer)) as url:
        yield url


def test_an_answer_larger_than_10_mib_is_a_failed_call(server: str) -> None:
    caller = HttpCaller()
    assert caller.post(f"{server}/small", b"{}", 1.0) == b"{}"
    with pytest.raises(CallError, match="larger than 10 MiB"):
        caller.post(f"{server}/big", b"{}", 1.0)
    caller.close()


def test_a_refused_connection_and_a_bad_url_are_unreachable() -> None:
    caller = HttpCaller()
    with pytest.raises(Unreachable, match="connection refused"):
        caller.post("http://127.0.0.1:9/predicate", b"{}", 1.0)
    with pytest.raises(Unreachable, match="not an http"):
        caller.post("/predicate", b"{}", 1.0)  # an empty urlPrefix, as Volcano builds it
    caller.close()


def test_the_wire_uses_volcanos_go_field_names() -> None:
    ssn = open_session(
        [
            node("n1", cpu="4", labels={"zone": "a"}),
            podgroup("g"),
            pod("p", group="g", cpu="1500m"),
        ],
        policy_text("allocate", ["gang"]),
    )
    wire = Wire(ssn)
    (job,) = ssn.jobs.values()
    (task,) = job.tasks.values()
    doc = json.loads(body(task=wire.task(task), node=wire.node(0)))
    assert doc["task"]["Resreq"]["MilliCPU"] == 1500
    assert doc["task"]["Status"] == 1  # Pending, Volcano's first TaskStatus bit
    assert doc["task"]["Pod"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1500m"
    assert doc["node"]["Name"] == "n1" and doc["node"]["Node"]["metadata"]["labels"] == {
        "zone": "a"
    }
    assert doc["node"]["Idle"]["MilliCPU"] == 4000
    assert set(wire.job(job)) >= {"UID", "Queue", "MinAvailable", "Tasks", "PodGroup"}
