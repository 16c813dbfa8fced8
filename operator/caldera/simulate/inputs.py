"""What ``caldera simulate`` and ``caldera explain`` read, checked before anything runs.

The policy is ``--policy`` (a policy file or a ConfigMap manifest carrying one), else the policy
``manifests/`` installs. The manifests must give the scheduler something to work on: an input
that cannot be read, or one without a Node, pod, PodGroup or Queue, stops the command with one
line (:class:`InputError`); objects that are malformed are reported and skipped, and the rest
runs. Workloads without a Node are decided as far as they can be (admission, phases, reasons)
after one "no nodes" line, which counts as a problem for ``--strict``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from caldera.cache.state import ClusterState
from caldera.errors import CalderaError, ConfigError
from caldera.framework.policy import Policy
from caldera.framework.policy_source import installed_policy, read_policy
from caldera.framework.registry import Registry
from caldera.models.core import FINISHED_PHASES
from caldera.simulate.manifests import Loaded, load_manifests
from caldera.simulate.progress import Progress

__all__ = ["InputError", "Inputs", "pending_pods", "read_inputs"]


class InputError(CalderaError):
    """Input the command cannot run on; the message is one line."""


@dataclass(slots=True)
class Inputs:
    registry: Registry
    policy: Policy
    loaded: Loaded
    problems: int = 0
    """Problems reported while reading beyond the loader's warnings (no nodes)."""


def _named(sources: Sequence[str]) -> str:
    return ", ".join("<stdin>" if s == "-" else s for s in sources)


def read_inputs(
    policy_path: str | None,
    sources: Sequence[str],
    report: Callable[[str], None],
    *,
    loaded: Loaded | Callable[[frozenset[tuple[str, str]]], Loaded] | None = None,
    progress: Progress | None = None,
    strict: bool = False,
) -> Inputs:
    """The registry, the policy and the manifests (or ``loaded``, objects read elsewhere: a live
    cluster, read given the objects the policy reads by name). What was skipped or ignored while
    loading goes to ``report``, one message each (the policy's warnings too; ``strict``: they
    make it invalid); anything that makes the run pointless raises InputError."""
    registry = Registry.from_entry_points()
    try:
        policy = (
            read_policy(policy_path, registry, strict=strict)
            if policy_path
            else installed_policy(registry)
        )
    except ConfigError as exc:
        raise InputError(f"invalid policy: {exc}") from None
    for warning in policy.warnings:
        report(f"policy: {warning}")
    if loaded is None:
        loaded = load_manifests(sources, progress, named=policy.read_objects)
    elif callable(loaded):
        loaded = loaded(policy.read_objects)
    if loaded.errors:
        raise InputError("; ".join(loaded.errors))
    for message in [*loaded.warnings, *loaded.notes]:
        report(message)
    state = loaded.state
    if state.nodes:
        return Inputs(registry, policy, loaded)
    where = _named(sources) if sources else "the cluster"
    if not (state.pods or state.podgroups or state.queues):
        raise InputError(f"no nodes in {where}: nothing to schedule on")
    report(f"no nodes in {where}: no pod can be placed; admission, phases and reasons only")
    return Inputs(registry, policy, loaded, problems=1)


def pending_pods(state: ClusterState, scheduler_names: Iterable[str]) -> int:
    """Pods the named schedulers would place: theirs, on no node yet, not finished."""
    names = frozenset(scheduler_names)
    return sum(
        1
        for pod in state.pods.values()
        if pod.spec.scheduler_name in names
        and not pod.spec.node_name
        and pod.status.phase not in FINISHED_PHASES
    )
