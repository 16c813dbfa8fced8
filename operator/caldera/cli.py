"""The ``caldera`` command line.

``caldera simulate`` runs the engine offline on manifests. Exit codes: 0 done (input problems are
reported on stderr and the rest still runs), 2 for a policy or usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from caldera.errors import ConfigError
from caldera.framework.policy import default_policy, load_policy_file
from caldera.framework.registry import Registry
from caldera.simulate.manifests import load_manifests
from caldera.simulate.report import to_json, to_table
from caldera.simulate.runner import simulate

__all__ = ["main"]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="caldera", description="Caldera batch scheduler")
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="run the scheduler offline on Kubernetes manifests")
    sim.add_argument(
        "--policy",
        help="scheduler policy (volcano-scheduler.conf format); "
        "default: Volcano's built-in default",
    )
    sim.add_argument(
        "--scheduler-name",
        action="append",
        dest="scheduler_names",
        help="schedule pods with this schedulerName (repeatable; default volcano)",
    )
    sim.add_argument("--cycles", type=_positive, default=1, help="scheduling cycles to run")
    sim.add_argument("--output", choices=("table", "json"), default="table")
    sim.add_argument(
        "manifests",
        nargs="+",
        metavar="MANIFEST",
        help="YAML files (multi-document or kind: List), or - for stdin",
    )
    return parser


def _simulate(args: argparse.Namespace) -> int:
    registry = Registry.from_entry_points()
    try:
        policy = (
            load_policy_file(args.policy, registry) if args.policy else default_policy(registry)
        )
    except ConfigError as exc:
        print(f"caldera: invalid policy: {exc}", file=sys.stderr)
        return 2
    loaded = load_manifests(args.manifests)
    for warning in loaded.warnings:
        print(f"caldera: {warning}", file=sys.stderr)
    sim = simulate(
        loaded.state,
        policy,
        registry,
        scheduler_names=args.scheduler_names or ["volcano"],
        cycles=args.cycles,
    )
    seen: set[str] = set()
    for rec in sim.cycles:
        for problem in rec.problems:
            if str(problem) not in seen:
                seen.add(str(problem))
                print(f"caldera: {problem}", file=sys.stderr)
    sys.stdout.write(to_json(sim) if args.output == "json" else to_table(sim))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "simulate":
        return _simulate(args)
    return 2  # pragma: no cover - argparse enforces the choices


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
