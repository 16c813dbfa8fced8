"""The ``caldera`` command line.

``caldera simulate`` runs the engine offline on manifests; ``caldera explain`` shows, for one
pod, every node's filter verdicts and scores; with ``--kubeconfig`` both read a live cluster
(read-only) instead. ``caldera run`` runs the scheduler against a cluster; ``caldera queue``
lists, shows, opens and closes queues (:mod:`caldera.queues_cli`). Exit codes
(:mod:`caldera.console`): 0 done (object problems are reported on stderr and the rest still
runs), 1 ``--strict`` and a problem was reported, or the leader lost its lease, 2 a usage,
policy, input or connection error (one line on stderr), 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from caldera import __version__, console
from caldera.cache.state import overlay
from caldera.collector import batch_process, keep_what_is_read
from caldera.errors import ConfigError
from caldera.framework.duration import parse_go_duration
from caldera.framework.policy import load_policy_file
from caldera.framework.registry import Registry
from caldera.queues_cli import add_queue, run_queue
from caldera.sharding.shard import MODES as SHARDING_MODES
from caldera.simulate.explain import ExplainError, explain
from caldera.simulate.explain import to_json as explain_json
from caldera.simulate.explain import to_table as explain_table
from caldera.simulate.inputs import InputError, Inputs, pending_pods, read_inputs
from caldera.simulate.manifests import Loaded, load_manifests
from caldera.simulate.progress import Progress
from caldera.simulate.report import to_json, to_table
from caldera.simulate.runner import simulate
from caldera.simulate.usage_file import Reading

__all__ = ["main"]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


_POLICY_HELP = (
    "scheduler policy: a volcano-scheduler.conf file, or a ConfigMap manifest carrying one "
    "under that key; default: the policy manifests/ installs"
)
_STRICT_HELP = (
    "exit 1 when any object problem is reported, and refuse a policy with keys nothing reads "
    "or plugins Caldera does not have (for CI)"
)


def _parser() -> argparse.ArgumentParser:
    parser = console.Parser(prog="caldera", description="Caldera batch scheduler")
    parser.add_argument("--version", action="version", version=f"caldera {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="run the scheduler offline on Kubernetes manifests")
    _add_engine_options(sim, "YAML files (multi-document or kind: List), or - for stdin")
    sim.add_argument("--cycles", type=_positive, default=1, help="scheduling cycles to run")
    ex = sub.add_parser(
        "explain", help="why a pod goes where it goes: every node's filter verdicts and scores"
    )
    ex.add_argument("pod", metavar="POD", help="the pending pod, as namespace/name or name")
    ex.add_argument(
        "--cycles",
        type=_positive,
        default=1,
        help="explain the pod in this session: the ones before it run first, as simulate "
        "--cycles runs them (default 1: the next session)",
    )
    _add_engine_options(ex, "YAML files, or - for stdin")
    _add_run(sub)
    _add_shard_controller(sub)
    add_queue(sub, _add_live)
    return parser


def _add_shard_controller(sub: Any) -> None:
    """``caldera shard-controller``: Volcano's sharding controller's flags."""
    from caldera.sharding.assign_config import DEFAULT_CONFIGMAP_NAME, DEFAULT_CONFIGMAP_NAMESPACE

    sc = sub.add_parser(
        "shard-controller",
        help="write the NodeShards of a sharded cluster's schedulers, as Volcano's sharding "
        "controller does",
    )
    sc.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: in cluster)")
    sc.add_argument("--sharding-configmap", default=DEFAULT_CONFIGMAP_NAME,
                    help="the ConfigMap holding sharding.yaml")  # fmt: skip
    sc.add_argument("--sharding-configmap-namespace", default=DEFAULT_CONFIGMAP_NAMESPACE)
    sc.add_argument("--leader-elect", type=_flag, nargs="?", const=True, default=True,
                    help="elect one writing controller through a Lease")  # fmt: skip
    sc.add_argument("--leader-elect-resource-namespace", dest="lock_namespace",
                    default="volcano-system")  # fmt: skip
    sc.add_argument("--leader-elect-resource-name", dest="lock_name",
                    default="volcano-sharding-controller")  # fmt: skip
    sc.add_argument("-v", dest="verbose", action="store_true", help="debug logging")


def _shard_controller(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import signal

    from caldera.operator.shard_controller import ControllerSettings, run_controller

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    settings = ControllerSettings(
        kubeconfig=args.kubeconfig,
        sharding_configmap=args.sharding_configmap,
        sharding_configmap_namespace=args.sharding_configmap_namespace,
        leader_elect=args.leader_elect,
        lock_namespace=args.lock_namespace,
        lock_name=args.lock_name,
    )

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_controller(settings, stop)

    asyncio.run(serve())
    return 0


def _add_engine_options(command: argparse.ArgumentParser, manifests_help: str) -> None:
    """The options simulate and explain share: policy, schedulers, output, strictness, and where
    the objects come from (manifests, a live cluster, or both)."""
    command.add_argument("--policy", help=_POLICY_HELP)
    command.add_argument(
        "--scheduler-name",
        action="append",
        dest="scheduler_names",
        help="schedule pods with this schedulerName (repeatable; default volcano)",
    )
    command.add_argument("--output", choices=("table", "json"), default="table")
    command.add_argument("--strict", action="store_true", help=_STRICT_HELP)
    command.add_argument(
        "--node-usage",
        metavar="FILE",
        help="nodes' real CPU and memory use, in percent, for the usage plugin (YAML: "
        "NODE: {cpu: 45, memory: 60, age: 1m}); with --kubeconfig and a policy that names a "
        "metrics source, the source is asked instead",
    )
    command.add_argument(
        "manifests",
        nargs="*",
        metavar="MANIFEST",
        help=f"{manifests_help}; with --kubeconfig, added to the cluster's objects "
        "(replacing any of the same kind and name)",
    )
    _add_live(command)


def _add_live(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="read the cluster of this kubeconfig (read-only: get and list requests only)",
    )
    command.add_argument(
        "--context", help="with a cluster: this kubeconfig context instead of the current one"
    )


def _live(args: argparse.Namespace) -> bool:
    return bool(args.kubeconfig or args.context)


def _read_cluster(args: argparse.Namespace, named: frozenset[tuple[str, str]]) -> Loaded:
    """The cluster's objects with the manifests' on top (InputError when it cannot be read),
    and the objects the policy reads by name (``named``). Objects of the manifests without a
    creation time are created now, after the cluster's."""
    import asyncio
    import time

    from caldera.k8s.live import LiveError, read_cluster

    try:
        live = asyncio.run(read_cluster(args.kubeconfig, args.context, named=named))
    except LiveError as exc:
        raise InputError(str(exc)) from None
    extra = (
        load_manifests(args.manifests, epoch=time.time(), named=named)
        if args.manifests
        else Loaded()
    )
    if extra.errors:
        raise InputError("; ".join(extra.errors))
    overlay(live.state, extra.state)
    warnings = [f"{live.server}: {w}" for w in live.warnings] + extra.warnings
    return Loaded(live.state, warnings, extra.notes)


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


_CHOICES = {"log_format": ("plain", "full", "json"), "scheduler_sharding_mode": SHARDING_MODES}


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
            shown = f" (default {default[0]})" if default else ""
            run.add_argument(flag, dest=f.name, action="append", help=f"{text}{shown}")
        elif isinstance(default, int) and not isinstance(default, bool):
            run.add_argument(flag, dest=f.name, type=_positive, default=default, help=text)
        elif isinstance(default, float):
            run.add_argument(flag, dest=f.name, type=_duration, default=default, help=text)
        else:
            run.add_argument(
                flag, dest=f.name, default=default, choices=_CHOICES.get(f.name), help=text
            )
    run.add_argument("-v", dest="verbose", action="store_true", help="debug logging")


def _load(args: argparse.Namespace) -> Inputs | None:
    """The registry, the policy and the manifests; None (said in one line) when unusable."""
    batch_process()  # a big input is millions of objects that form no cycles
    try:
        cluster = functools.partial(_read_cluster, args) if _live(args) else None
        inputs = read_inputs(
            args.policy,
            args.manifests,
            console.say,
            loaded=cluster,
            progress=Progress(sys.stderr),
            strict=args.strict,
        )
    except InputError as exc:
        console.say(str(exc))
        return None
    keep_what_is_read()
    inputs.registry.caller = args.caller  # the policy's extenders are asked, as a session would
    return inputs


def _node_usage(args: argparse.Namespace, inputs: Inputs) -> dict[str, Reading] | None:
    """Nodes' real load: from ``--node-usage``, else, on a live cluster, from the policy's metrics
    source (asked once); None when there is none. InputError for a file that cannot be used."""
    from caldera.simulate.usage_file import UsageFileError, read_node_usage

    if args.node_usage:
        try:
            return read_node_usage(args.node_usage)
        except UsageFileError as exc:
            raise InputError(str(exc)) from None
    if not _live(args):
        return None
    import asyncio
    import time

    from caldera.outside.metrics import MetricsSettings, UsageSource

    settings = MetricsSettings.of(inputs.policy.metrics)
    if settings is None:
        return None
    source = UsageSource(dict, lambda: inputs.loaded.state.nodes.keys())
    asyncio.run(source.refresh(settings))
    if source.problem:
        console.say(
            f"metrics source {settings.address}: {source.problem}; nodes are not filtered or "
            "scored by load"
        )
    now = time.time()
    return {
        n: (u.cpu, u.memory, max(now - u.measured, 0.0))
        for n, u in source.usage.items()
        if u.measured is not None
    }


def _verdict(args: argparse.Namespace, problems: int) -> int:
    return console.PROBLEMS if args.strict and problems else console.OK


def _explain(args: argparse.Namespace) -> int:
    inputs = _load(args)
    if inputs is None:
        return console.USAGE
    try:
        usage = _node_usage(args, inputs)
    except InputError as exc:
        console.say(str(exc))
        return console.USAGE
    try:
        ex = explain(
            inputs.loaded.state,
            inputs.policy,
            inputs.registry,
            args.pod,
            scheduler_names=args.scheduler_names or ["volcano"],
            source="the cluster" if _live(args) else "the manifests",
            progress=Progress(sys.stderr),
            node_usage=usage,
            after=args.cycles - 1,
        )
    except ExplainError as exc:
        console.say(str(exc))
        return console.USAGE
    console.out(explain_json(ex) if args.output == "json" else explain_table(ex))
    return _verdict(args, len(inputs.loaded.warnings) + inputs.problems)


def _simulate(args: argparse.Namespace) -> int:
    inputs = _load(args)
    if inputs is None:
        return console.USAGE
    try:
        usage = _node_usage(args, inputs)
    except InputError as exc:
        console.say(str(exc))
        return console.USAGE
    names = args.scheduler_names or ["volcano"]
    if not pending_pods(inputs.loaded.state, names):
        console.say(f"nothing to schedule: no pending pod has schedulerName {' or '.join(names)}")
    state, policy, registry = inputs.loaded.state, inputs.policy, inputs.registry
    sim = simulate(
        state,
        policy,
        registry,
        scheduler_names=names,
        cycles=args.cycles,
        progress=Progress(sys.stderr),
        node_usage=usage,
    )
    seen: set[str] = set()
    for rec in sim.cycles:
        for problem in rec.problems:
            if str(problem) not in seen:
                seen.add(str(problem))
                console.say(str(problem))
    console.out(to_json(sim) if args.output == "json" else to_table(sim))
    return _verdict(args, len(inputs.loaded.warnings) + inputs.problems + len(seen))


def _run(args: argparse.Namespace) -> int:
    from caldera.k8s.lease import election_error
    from caldera.operator.app import run
    from caldera.operator.settings import Settings

    defaults = Settings()
    # a repeatable flag never given is None: its default list then
    settings = Settings(
        **{
            f.name: getattr(defaults, f.name)
            if getattr(args, f.name) is None
            else getattr(args, f.name)
            for f in fields(Settings)
        }
    )
    try:
        settings.scope()
    except ValueError as exc:
        console.say(str(exc))
        return console.USAGE
    problem = election_error(
        settings.lease_duration, settings.renew_deadline, settings.retry_period
    )
    if settings.leader_elect and problem is not None:
        console.say(f"leader election: {problem}")
        return console.USAGE
    if settings.scheduler_conf:
        # before connecting: a policy the scheduler cannot start with fails at once
        try:
            load_policy_file(
                settings.scheduler_conf,
                Registry.from_entry_points(),
                strict=settings.strict_policy,
            )
        except ConfigError as exc:
            console.say(f"invalid policy: {exc}")
            return console.USAGE
    return run(settings)


def _command(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if (
        extra
        and args.command in ("simulate", "explain", "queue")
        and not any(e.startswith("-") and e != "-" for e in extra)
    ):
        # MANIFEST... may follow options that follow the first positional (argparse stops
        # filling an optional-count positional at the first option)
        args.manifests = [*args.manifests, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command in ("simulate", "explain") and not (args.manifests or _live(args)):
        parser.error(f"{args.command}: give MANIFEST files, or --kubeconfig to read a cluster")
    if args.command in ("simulate", "explain"):
        from caldera.outside.http import HttpCaller

        with contextlib.closing(HttpCaller()) as args.caller:
            return _simulate(args) if args.command == "simulate" else _explain(args)
    if args.command == "run":
        return _run(args)
    if args.command == "shard-controller":
        return _shard_controller(args)
    if args.command == "queue":
        return run_queue(args)
    return console.USAGE  # pragma: no cover - argparse enforces the choices


def main(argv: Sequence[str] | None = None) -> int:
    return console.guarded(lambda: _command(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
