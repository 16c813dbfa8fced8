"""Random change streams over a cluster state, and snapshots as plain data to compare.

Shared by the tests that check a snapshot made from kept pieces (the build memo, the model kept
between sessions) against one built from nothing.
"""

from __future__ import annotations

import random
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np

from builders import node, owner, pod, podgroup, priority_class, queue, state_of
from caldera.api.node import NodeTable
from caldera.api.snapshot import Snapshot
from caldera.cache.state import ClusterState
from caldera.models.core import Pod

__all__ = ["Stream", "canonical", "differences", "snapshot_view"]

SESSION_MARKS = frozenset({"settled", "at_open"})
"""Job fields that say which settled jobs a session woke: set when a session opens, not part
of what a build makes."""


def canonical(value: Any, seen: set[int] | None = None) -> Any:
    """Plain data for ``value``: dataclasses field by field, arrays as lists, Tasks and Jobs
    reached again by their key only (the job's tasks and the node table's tasks are the same
    objects)."""
    seen = set() if seen is None else seen
    if isinstance(value, np.ndarray):
        return ("array", value.shape, value.tolist())
    if isinstance(value, NodeTable):
        return {
            slot: canonical(getattr(value, slot), seen)
            for slot in NodeTable.__slots__
            # static: caches shared between sessions; changes: a log read within one session
            if slot not in ("space", "static", "changes") and not slot.startswith("_")
        }
    if is_dataclass(value) and not isinstance(value, type):
        if id(value) in seen:
            return ("again", type(value).__name__, getattr(value, "uid", None))
        seen.add(id(value))
        return {
            f.name: canonical(getattr(value, f.name), seen)
            for f in fields(value)
            if f.name not in SESSION_MARKS
        }
    if isinstance(value, dict):
        return {str(k): canonical(v, seen) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v, seen) for v in value]
    return value


def snapshot_view(snap: Snapshot) -> dict[str, Any]:
    return {
        "space": snap.space.names,
        "nodes": canonical(snap.nodes),
        "jobs": canonical(snap.jobs),
        "queues": canonical(snap.queues),
        "held": canonical(snap.held),
        "hypernodes": canonical(snap.hypernodes),
    }


class Stream:
    """Random changes to a cluster state, each a new object version as a watch delivers it."""

    def __init__(
        self, seed: int, *, uids: bool = False, in_place: bool = False, others: bool = False
    ) -> None:
        self.rng = random.Random(seed)
        self.uids = uids
        """Give half the new pods a UID (a bare pod with one is a group of its own)."""
        self.others = others
        """Give some new pods the scheduler ``peer`` or ``other`` rather than ``volcano``."""
        self.in_place = in_place
        """Also change nodes in place: cordoned, relabelled, tainted, resized (no row moves)."""
        self.state: ClusterState = state_of(
            [
                *(node(f"n{i}", cpu="4", memory="8Gi") for i in range(6)),
                queue("q1", weight=2),
                priority_class("high", 100),
                podgroup("base", min_member=2),
                *(
                    pod(
                        f"r{i}",
                        group="base" if i < 3 else None,
                        cpu="500m",
                        node_name=f"n{i}",
                        phase="Running",
                    )
                    for i in range(8)
                ),
            ]
        )
        self.serial = 0

    def _name(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def _pick(self, table: dict[str, Any]) -> str | None:
        return self.rng.choice(sorted(table)) if table else None

    def step(self) -> str:
        rng, state = self.rng, self.state
        what = rng.choices(
            [
                "pod",
                "bind",
                "finish",
                "resize",
                "delete",
                "group",
                "ungroup",
                "node",
                "queue",
                "priority",
                "gpu",
                "terminate",
                "controller",
                "regroup",
            ],
            weights=[8, 6, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1],
        )[0]
        if self.in_place and rng.random() < 0.1:
            what = "cordon"
        if what == "pod":
            groups = sorted(k for k in state.podgroups if k != "default/base")
            group = rng.choice(groups) if groups and rng.random() < 0.6 else None
            state.add(
                pod(
                    self._name("p"),
                    group=group.partition("/")[2] if group else None,
                    cpu=rng.choice(["100m", "500m", "1", "2"]),
                    memory=rng.choice(["128Mi", "1Gi"]),
                    priority_class=rng.choice(["", "high", "missing"]),
                    annotations=(
                        {"scheduling.volcano.sh/queue-name": rng.choice(["q1", "gone"])}
                        if rng.random() < 0.2
                        else None
                    ),
                    # bare pods of one controller share a group: the first pod describes it
                    owners=(
                        [owner("ReplicaSet", rng.choice(["rs-a", "rs-b"]))]
                        if group is None and rng.random() < 0.4
                        else ()
                    ),
                    created=1_700_000_000.0 + self.serial,
                    uid=f"uid-{self.serial}" if self.uids and rng.random() < 0.5 else "",
                    scheduler=(
                        rng.choice(["volcano"] * 4 + ["peer", "other"])
                        if self.others
                        else "volcano"
                    ),
                )
            )
        elif what in ("bind", "finish", "terminate", "resize", "delete"):
            key = self._pick(state.pods)
            if key is None:
                return "nothing"
            old = state.pods[key]
            if what == "delete":
                del state.pods[key]
            elif what == "bind" and not old.spec.node_name:
                target = self._pick(state.nodes) or "n0"
                spec = old.spec.model_copy(update={"node_name": target})
                status = old.status.model_copy(update={"phase": rng.choice(["Pending", "Running"])})
                state.pods[key] = old.model_copy(update={"spec": spec, "status": status})
            elif what == "finish":
                status = old.status.model_copy(
                    update={"phase": rng.choice(["Succeeded", "Failed"])}
                )
                state.pods[key] = old.model_copy(update={"status": status})
            elif what == "terminate":
                meta = old.metadata.model_copy(update={"deletion_timestamp": 1_700_000_500.0})
                state.pods[key] = old.model_copy(update={"metadata": meta})
            elif what == "resize":
                state.pods[key] = _resized(old, rng.choice(["300m", "3"]))
        elif what == "group":
            state.add(
                podgroup(
                    self._name("g"),
                    min_member=rng.choice([1, 2, 3]),
                    queue=rng.choice(["default", "q1", "gone"]),
                    priority_class=rng.choice(["", "high"]),
                    min_resources=rng.choice([None, {"cpu": "1"}]),
                    created=1_700_000_000.0 + self.serial,
                )
            )
        elif what == "ungroup":
            key = self._pick(state.podgroups)
            if key is not None:
                del state.podgroups[key]
        elif what == "node":
            name = rng.choice(["n1", "n7", "n8"])
            if name in state.nodes and rng.random() < 0.4:
                del state.nodes[name]
            else:
                state.add(
                    node(
                        name,
                        cpu=rng.choice(["2", "8"]),
                        ready=rng.random() < 0.8,
                        labels={"zone": rng.choice(["a", "b"])},
                    )
                )
        elif what == "queue":
            if "q2" in state.queues and rng.random() < 0.5:
                del state.queues["q2"]
            else:
                state.add(queue("q2", weight=rng.choice([1, 3]), capability={"cpu": "6"}))
        elif what == "regroup":  # a new version of a PodGroup: its queue or size changed
            key = self._pick(state.podgroups)
            if key is not None:
                state.add(
                    podgroup(
                        key.partition("/")[2],
                        min_member=rng.choice([1, 2]),
                        queue=rng.choice(["default", "q1", "gone"]),
                        created=1_700_000_000.0,
                    )
                )
        elif what == "cordon":  # the same node, changed where it stands: no row moves
            picked = self._pick({k: n for k, n in state.nodes.items() if n.ready})
            if picked is not None:
                state.add(
                    node(
                        picked,
                        cpu=rng.choice(["2", "4", "8"]),
                        unschedulable=rng.random() < 0.5,
                        labels={"zone": rng.choice(["a", "b"])},
                        taints=(
                            [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
                            if rng.random() < 0.3
                            else []
                        ),
                    )
                )
        elif what == "controller":  # rs-a's group-min-member read (or changed); rs-b's never
            state.owner_min_members[owner("ReplicaSet", "rs-a")["uid"]] = rng.choice([1, 2])
        elif what == "priority":
            state.add(priority_class("high", rng.choice([50, 100, 1000])))
        elif what == "gpu":  # a resource name that changes the space, then goes away again
            name = "n-gpu"
            if name in state.nodes:
                del state.nodes[name]
            else:
                state.add(node(name, extra={"example.com/gpu": "4"}))
        return what


def _resized(old: Pod, cpu: str) -> Pod:
    raw = old.model_dump()
    for container in raw["spec"]["containers"]:
        container.setdefault("resources", {})["requests"] = {"cpu": cpu}
    return Pod.model_validate(raw)


def differences(a: Any, b: Any, path: str = "", limit: int = 10) -> list[str]:
    """Where two plain-data values differ (at most ``limit`` places), for assertion messages."""
    out: list[str] = []

    def walk(x: Any, y: Any, at: str) -> None:
        if len(out) >= limit or x == y:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for key in sorted(x.keys() | y.keys(), key=str):
                if key not in x or key not in y:
                    out.append(
                        f"{at}/{key}: only in {'the second' if key not in x else 'the first'}"
                    )
                else:
                    walk(x[key], y[key], f"{at}/{key}")
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (xi, yi) in enumerate(zip(x, y, strict=True)):
                walk(xi, yi, f"{at}[{i}]")
        else:
            out.append(f"{at}: {str(x)[:120]} != {str(y)[:120]}")

    walk(a, b, path)
    return out
