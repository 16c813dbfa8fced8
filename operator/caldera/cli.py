"""The ``caldera`` command line.

``caldera simulate`` runs the engine offline on manifests; ``caldera explain`` shows, for one
pod, every node's filter verdicts and scores; ``caldera run`` runs the scheduler against a
cluster. Exit codes: 0 done (input problems are reported on stderr and the rest still runs),
1 the leader lost its lease, 2 a policy, usage or connection error (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from caldera.collector import fewer_collections, no_collection_at_exit
from caldera.errors import ConfigError
from caldera.framework.duration import parse_go_duration
from caldera.framework.policy import Policy, default_policy, load_policy_file
from caldera.framework.registry import Registry
from caldera.simulate.explain import ExplainError, explain
from caldera.simulate.explain import to_json as explain_json
from caldera.simulate.explain import to_table as explain_table
from caldera.simulate.manifests import Loaded, load_manifests
from caldera.simulate.progress import Progress
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
    ex = sub.add_parser(
        "explain", help="why a pod goes where it goes: every node's filter verdicts and scores"
    )
    ex.add_argument("pod", metavar="POD", help="the pending pod, as namespace/name or name")
    ex.add_argument("--policy", help="scheduler policy; default: Volcano's built-in default")
    ex.add_argument(
        "--scheduler-name",
        action="append",
        dest="scheduler_names",
        help="schedule pods with this schedulerName (repeatable; default volcano)",
    )
    ex.add_argument("--output", choices=("table", "json"), default="table")
    ex.add_argument("manifests", nargs="+", metavar="MANIFEST", help="YAML files, or - for stdin")
    _add_run(sub)
    return parser


def _duration(text: str) -> float:
    try:
        value = parse_go_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def _flag(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")


_CHOICES = {"log_format": ("plain", "full", "json")}


def _add_run(sub: Any) -> None:
    """``caldera run``'s flags, one per :class:`Settings` field, with its default and help."""
    from caldera.operator.settings import FLAG_NAMES, Settings, help_of

    run = sub.add_parser("run", help="run the scheduler against a cluster")
    defaults = Settings()
    for f in fields(Settings):
        flag = FLAG_NAMES.get(f.name, "--" + f.name.replace("_", "-"))
        default = getattr(defaults, f.name)
        text = help_of(f.name)
        if isinstance(default, bool):
            run.add_argument(
                flag, dest=f.name, type=_flag, nargs="?", const=True, default=default, help=text
            )
        elif isinstance(default, list):
            run.add_argument(
                flag, dest=f.name, action="append", help=f"{text} (default {default[0]})"
            )
        elif isinstance(default, int) and not isinstance(default, bool):
            run.add_argument(flag, dest=f.name, type=_positive, default=default, help=text)
        elif isinstance(default, float):
            run.add_argument(flag, dest=f.name, type=_duration, default=default, help=text)
        else:
            run.add_argument(
                flag, dest=f.name, default=default, choices=_CHOICES.get(f.name), help=text
            )
    run.add_argument("-v", dest="verbose", action="store_true", help="debug logging")


def _load(args: argparse.Namespace) -> tuple[Registry, Policy, Loaded] | None:
    """The registry, the policy and the manifests; None (reported) when the policy is invalid."""
    fewer_collections()  # a big input is millions of objects that form no cycles
    no_collection_at_exit()
    registry = Registry.from_entry_points()
    try:
        policy = (
            load_policy_file(args.policy, registry) if args.policy else default_policy(registry)
        )
    except ConfigError as exc:
        print(f"caldera: invalid policy: {exc}", file=sys.stderr)
        return None
    loaded = load_manifests(args.manifests, Progress(sys.stderr))
    for warning in loaded.warnings:
        print(f"caldera: {warning}", file=sys.stderr)
    return registry, policy, loaded


def _explain(args: argparse.Namespace) -> int:
    ready = _load(args)
    if ready is None:
        return 2
    registry, policy, loaded = ready
    try:
        ex = explain(
            loaded.state,
            policy,
            registry,
            args.pod,
            scheduler_names=args.scheduler_names or ["volcano"],
            progress=Progress(sys.stderr),
        )
    except ExplainError as exc:
        print(f"caldera: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(explain_json(ex) if args.output == "json" else explain_table(ex))
    return 0


def _simulate(args: argparse.Namespace) -> int:
    ready = _load(args)
    if ready is None:
        return 2
    registry, policy, loaded = ready
    sim = simulate(
        loaded.state,
        policy,
        registry,
        scheduler_names=args.scheduler_names or ["volcano"],
        cycles=args.cycles,
        progress=Progress(sys.stderr),
    )
    seen: set[str] = set()
    for rec in sim.cycles:
        for problem in rec.problems:
            if str(problem) not in seen:
                seen.add(str(problem))
                print(f"caldera: {problem}", file=sys.stderr)
    sys.stdout.write(to_json(sim) if args.output == "json" else to_table(sim))
    return 0


def _run(args: argparse.Namespace) -> int:
    from caldera.k8s.lease import election_error
    from caldera.operator.app import run
    from caldera.operator.settings import Settings

    values = {f.name: getattr(args, f.name) for f in fields(Settings)}
    settings = Settings(**{**values, "scheduler_names": args.scheduler_names or ["volcano"]})
    problem = election_error(
        settings.lease_duration, settings.renew_deadline, settings.retry_period
    )
    if settings.leader_elect and problem is not None:
        print(f"caldera: leader election: {problem}", file=sys.stderr)
        return 2
    return run(settings)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "explain":
        return _explain(args)
    if args.command == "run":
        return _run(args)
    return 2  # pragma: no cover - argparse enforces the choices


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
