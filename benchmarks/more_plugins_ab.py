"""SchedulingBasic with and without the plugins other Volcano configs switch on, in turn.

One process builds the SchedulingBasic cluster (``scheduling_basic.py``) twice: once as it is,
under Volcano's default policy, and once with ``--more-plugins`` (resourcequota, nodegroup, tdm,
rescheduling and the shuffle action, with the nodes and queue they read). It then runs the first
session (every pod placed) of each in turn, ``--pairs`` times, and prints each pair's placement
rate (pods per CPU second of the session) and the ratio: taken pair by pair, in one process, the
ratio holds while the machine's speed drifts.

    python benchmarks/more_plugins_ab.py --pairs 6
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import scheduling_basic as basic
from caldera.cache.snapshot import BuildMemo, build_snapshot
from caldera.cache.state import ClusterState
from caldera.framework.cycle import run_cycle
from caldera.framework.policy import Policy, default_policy, load_policy
from caldera.framework.registry import Registry


def session(state: ClusterState, policy: Policy, registry: Registry, memo: BuildMemo) -> float:
    """Pods placed per CPU second by one session on ``state`` (not changed)."""
    snapshot, _ = build_snapshot(
        state,
        scheduler_names=["volcano"],
        now=1_700_100_000.0,
        session_id="ab",
        memo=memo,
        managed_resources=policy.managed_resources,
    )
    start = time.process_time()
    result = run_cycle(snapshot, policy, registry)
    return len(result.binds) / (time.process_time() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--pairs", type=int, default=6)
    args = parser.parse_args()
    registry = Registry.from_entry_points()
    plain_state = basic.build_state(args.nodes, args.pods, 0)
    more_state = basic.build_state(args.nodes, args.pods, 0)
    basic.add_extras(more_state)
    plain = default_policy(registry)
    more = load_policy(basic.EXTRAS_POLICY, registry, strict=True)
    memos = BuildMemo(), BuildMemo()
    session(plain_state, plain, registry, memos[0])  # warm both
    session(more_state, more, registry, memos[1])
    rows = []
    for _ in range(args.pairs):
        a = session(plain_state, plain, registry, memos[0])
        b = session(more_state, more, registry, memos[1])
        rows.append({"plain": round(a, 1), "more_plugins": round(b, 1), "ratio": round(b / a, 3)})
        print(json.dumps(rows[-1]))
    print(json.dumps({"median_ratio": statistics.median(r["ratio"] for r in rows)}))


if __name__ == "__main__":
    main()
