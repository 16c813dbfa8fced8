"""Where the memory per pod goes: the validated models, and what the session process keeps.

Why: peak RSS says how much, not what. This builds the state of ``--pods`` running bare pods on
``--nodes`` nodes the way the operator receives them (validated from the API's JSON), then one
snapshot from the :class:`~caldera.model.Model` the session process keeps, and reports with
tracemalloc the bytes per pod of each part and the source lines that allocate most.

    python benchmarks/heap_profile.py [--nodes 1000] [--pods 10000] [--top 8]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _api_server as api
from caldera.cache.state import ClusterState
from caldera.model import Model
from caldera.models.core import Node, Pod
from caldera.models.volcano import Queue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--top", type=int, default=8, help="source lines to list per part")
    args = parser.parse_args()
    raw = []
    for i in range(args.pods):
        obj = api.pod(f"run-{i}", "heap", node_name=f"node-{i % args.nodes:05d}")
        obj["metadata"].update(uid=f"uid-{i}", creationTimestamp="2026-01-01T00:00:00Z")
        raw.append(json.dumps(obj))
    gc.collect()
    tracemalloc.start(1)
    empty = tracemalloc.take_snapshot()
    state = ClusterState()
    for i in range(args.nodes):
        state.add(Node.model_validate(api.node(i)))
    state.add(Queue.model_validate({"metadata": {"name": "default"}, "spec": {"weight": 1}}))
    for text in raw:
        state.add(Pod.model_validate_json(text))
    gc.collect()
    models = tracemalloc.take_snapshot()
    model = Model(scheduler_names=["volcano"], default_queue="default", bare_pods_in_memory=True)
    snapshot, _ = model.snapshot(state, now=time.time(), session_id="heap")
    del snapshot
    gc.collect()
    kept = tracemalloc.take_snapshot()
    for title, before, after in (
        ("validated models (every process holds them)", empty, models),
        ("kept between builds (session process)", models, kept),
    ):
        diff = after.compare_to(before, "lineno")
        total = sum(d.size_diff for d in diff)
        print(f"{title}: {total / args.pods:,.0f} bytes per pod, {total / 2**20:,.1f} MiB")
        for d in diff[: args.top]:
            frame = d.traceback[0]
            print(f"  {d.size_diff / 2**20:7.1f} MiB  {frame.filename}:{frame.lineno}")


if __name__ == "__main__":
    main()
