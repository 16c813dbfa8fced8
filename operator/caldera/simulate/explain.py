"""``caldera explain``: for one pod, every node with each filter's verdict and each scorer's score.

The pod is explained against the cluster as the next session would open on it: pods already on
nodes count (whatever their scheduler), bare pods have their PodGroups, and the policy's plugins
are open. Other pending pods are not placed first, so inside a gang this shows where *this* pod
could go on its own; what the whole session would do with it (its gang, its queue's share and
the pods placed before it included) is run as well, on a copy of the cluster, and reported as
``session``. Scores are shown for the nodes that pass every filter only: that is the set
kube-scheduler and Caldera score, and the batch scorers normalise over it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from caldera.api.fiterror import FitErrors
from caldera.api.hypernode import NO_RULE, TopologyTrace
from caldera.api.task import Task
from caldera.cache.queues import ensure_builtin_queues
from caldera.cache.snapshot import build_snapshot, stable_uid
from caldera.cache.state import ClusterState
from caldera.framework.placement import choose_node, resource_rejections
from caldera.framework.policy import Policy
from caldera.framework.registry import Registry
from caldera.framework.session import Session
from caldera.models.volcano import GROUP_NAME_ANNOTATION
from caldera.plugins.deviceshare import DeviceSharePlugin
from caldera.plugins.nodeorder import NodeOrderPlugin, per_row
from caldera.plugins.predicates import PredicatesPlugin
from caldera.simulate.progress import Progress
from caldera.simulate.runner import adopt_bare_pods, simulate

__all__ = ["ExplainError", "Explanation", "NodeVerdict", "explain", "to_json", "to_table"]


@dataclass(slots=True)
class NodeVerdict:
    node: str
    reasons: dict[str, list[str]] = field(default_factory=dict)
    """Filter (``NodeResourcesFit`` for the resource fit) → why it rejects this node."""
    scores: dict[str, float] = field(default_factory=dict)
    """Scorer → weighted score (feasible nodes only)."""
    total: float | None = None
    devices: str = ""
    """The shared cards the pod would get here (deviceshare), in HAMi's choice."""

    @property
    def fits(self) -> bool:
        return not self.reasons


@dataclass(slots=True)
class Explanation:
    pod: str
    job: str
    queue: str
    verdict: str
    """Where the pod would go on its own, or why it fits no node."""
    session: str
    """What the next session would do with it: bind it to a node, or the PodScheduled message
    it would get (its gang's, its queue's...)."""
    chosen: str | None
    pre_filter: str | None
    nodes: list[NodeVerdict]
    weights: dict[str, int]
    victims: list[str] = field(default_factory=list)
    """Pods the next session's preempt or reclaim would evict to make room for it."""
    no_victims: str = ""
    """Why preempt or reclaim would evict nothing for it (empty: they did not try)."""
    topology: TopologyTrace | None = None
    """The next session's HyperNode search for the pod's job (jobs with network topology)."""


class ExplainError(ValueError):
    """The pod cannot be explained (unknown, not ours, already bound)."""


def _find(ssn: Session, key: str) -> Task:
    for job in ssn.jobs.values():
        for task in job.tasks.values():
            if f"{task.namespace}/{task.name}" == key:
                return task
    raise ExplainError(f"pod {key} is not a pending pod of this scheduler")


def explain(
    state: ClusterState,
    policy: Policy,
    registry: Registry,
    pod: str,
    *,
    scheduler_names: Iterable[str],
    default_queue: str = "default",
    progress: Progress | None = None,
) -> Explanation:
    """Where the next session puts ``pod``, and every node's filter verdicts and scores for it;
    ``progress`` (shown on a terminal only) follows that session."""
    shown = progress or Progress()
    try:
        return _explain(state, policy, registry, pod, list(scheduler_names), default_queue, shown)
    finally:
        shown.clear()


def _explain(
    state: ClusterState,
    policy: Policy,
    registry: Registry,
    pod: str,
    names: list[str],
    default_queue: str,
    progress: Progress,
) -> Explanation:
    key = pod if "/" in pod else f"default/{pod}"
    found = state.pods.get(key)
    if found is None:
        raise ExplainError(f"pod {key} is not in the manifests")
    if found.spec.node_name:
        raise ExplainError(f"pod {key} is already bound to {found.spec.node_name}")
    if found.spec.scheduler_name not in names:
        raise ExplainError(
            f"pod {key} has schedulerName {found.spec.scheduler_name!r}, not {' or '.join(names)}"
        )
    ensure_builtin_queues(state, default_queue, created=0.0)
    adopt_bare_pods(state, names)
    session, victims, no_victims, topology = _next_session(
        state, policy, registry, key, names, default_queue, progress
    )
    progress.show(f"explaining {key}: every node's filters and scores")
    snapshot, _ = build_snapshot(
        state,
        scheduler_names=names,
        now=0.0,
        session_id=stable_uid("Session", "explain"),
        default_queue=default_queue,
        managed_resources=policy.managed_resources,
    )
    ssn = Session(snapshot, policy, registry)
    ssn.open()
    task = _find(ssn, key)
    job = ssn.jobs[task.job]
    nodes = ssn.nodes
    verdicts = [NodeVerdict(name) for name in nodes.names]

    pre = ssn.pre_predicate(task)
    predicates = [p for p in ssn.plugins if isinstance(p, PredicatesPlugin)]
    for predicate in predicates:
        for name, rejections in predicate.verdicts(task):
            for reason, mask in rejections:
                for row in np.flatnonzero(mask):
                    verdicts[row].reasons.setdefault(name, []).append(reason)
    for plugin in ssn.plugins:
        if isinstance(plugin, DeviceSharePlugin) and plugin.state is not None:
            for at, node in enumerate(verdicts):
                said = plugin.state.explain(task, at)
                if said is None:
                    break
                fits, text = said
                if fits:
                    node.devices = text
                else:
                    node.reasons.setdefault(plugin.name, []).append(text)
    for reason, mask in resource_rejections(ssn.space, task.resreq, nodes.idle):
        for row in np.flatnonzero(mask):
            verdicts[row].reasons.setdefault("NodeResourcesFit", []).append(reason)

    feasible = np.array([i for i, v in enumerate(verdicts) if v.fits], dtype=np.intp)
    weights: dict[str, int] = {}
    if pre is None and len(feasible):
        for plugin in ssn.plugins:
            if isinstance(plugin, NodeOrderPlugin):
                for scorer in plugin.scorers:
                    weights[scorer.name] = scorer.weight
                    values = per_row(scorer.fn(task, feasible), len(feasible)) * scorer.weight
                    for row, value in zip(feasible, values.tolist(), strict=True):
                        verdicts[row].scores[scorer.name] = value
        totals = ssn.node_order(task, feasible)
        for row, value in zip(feasible, totals.tolist(), strict=True):
            verdicts[row].total = value

    choice = choose_node(ssn, task)
    if isinstance(choice, FitErrors):
        verdict, chosen = choice.available(), None
    else:
        chosen = nodes.names[choice.node]
        verdict = f"would be placed on {chosen}"
    return Explanation(
        pod=key,
        job=task.job,
        queue=job.queue,
        verdict=verdict,
        session=session,
        victims=victims,
        no_victims=no_victims,
        topology=topology,
        chosen=chosen,
        pre_filter=pre,
        nodes=verdicts,
        weights=weights,
    )


def _next_session(
    state: ClusterState,
    policy: Policy,
    registry: Registry,
    key: str,
    names: list[str],
    default_queue: str,
    progress: Progress,
) -> tuple[str, list[str], str, TopologyTrace | None]:
    """One full session on a copy of ``state``: where it binds the pod, or the pod's message;
    the pods it evicts to make room for it; when it evicts none, why (if preempt or reclaim
    tried); and its job's HyperNode search."""
    copy = replace(state, **{f.name: dict(getattr(state, f.name)) for f in fields(state)})
    sim = simulate(
        copy,
        policy,
        registry,
        scheduler_names=names,
        default_queue=default_queue,
        progress=progress,
    )
    result = sim.cycles[0].result
    victims = sorted(
        f"{e.namespace}/{e.name} ({e.reason})" for e in result.evictions if e.preemptor == key
    )
    note = "" if victims else result.preemption_notes.get(key, "")
    pod = copy.pods[key]
    group = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION, "")
    trace = result.topology.get(f"{pod.metadata.namespace}/{group}")
    for bind in result.binds:
        if f"{bind.namespace}/{bind.name}" == key:
            return f"bound to {bind.node}", victims, note, trace
    for cond in result.pod_conditions:
        if f"{cond.namespace}/{cond.name}" == key:
            return f"{cond.reason}: {cond.message}", victims, note, trace
    if victims:
        return (
            "pipelined onto the room its victims free; bound once they are gone",
            victims,
            note,
            trace,
        )
    return "not considered (its PodGroup is not enqueued or not valid)", victims, note, trace


def to_json(ex: Explanation) -> str:
    doc: dict[str, Any] = {
        "pod": ex.pod,
        "podGroup": ex.job,
        "queue": ex.queue,
        "verdict": ex.verdict,
        "session": ex.session,
        "victims": ex.victims,
        "noVictims": ex.no_victims or None,
        "node": ex.chosen,
        "topology": _topology_doc(ex.topology),
        "preFilter": ex.pre_filter,
        "weights": ex.weights,
        "nodes": {
            v.node: {
                "fits": v.fits,
                "reasons": v.reasons,
                "scores": v.scores,
                "total": v.total,
                **({"devices": v.devices} if v.devices else {}),
            }
            for v in ex.nodes
        },
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _topology_doc(trace: TopologyTrace | None) -> dict[str, Any] | None:
    if trace is None:
        return None
    return {
        "rule": trace.rule,
        "hyperNode": trace.chosen or None,
        "subGroups": {name: _topology_doc(sub) for name, sub in sorted(trace.subgroups.items())},
        "tiers": [
            {
                "tier": t.tier,
                "name": t.name,
                "hyperNodes": t.candidates,
                "ruledOut": t.pruned,
                "note": t.note or None,
                "why": dict(t.tried),
            }
            for t in trace.tiers
        ],
    }


_LISTED = 8
"""HyperNodes listed per tier in the table (the JSON has them all)."""


def _topology_lines(trace: TopologyTrace, what: str = "the job") -> list[str]:
    """The search of a job (then of each of its sub-groups), for the table."""
    lines: list[str] = []
    head = f"network topology ({trace.rule}): "
    if trace.rule == NO_RULE:
        pass
    elif trace.chosen:
        lines.append(f"{head}{what} goes to HyperNode {trace.chosen}")
    elif trace.outside:
        lines.append(f"{head}no HyperNode can hold {what}; it is placed across the cluster")
    else:
        lines.append(f"{head}no HyperNode can hold {what}")
        for t in trace.tiers:
            if t.note or not t.candidates:
                lines.append(f"  {t.summary()}")
                continue
            tried = len(t.tried) - t.pruned
            lines.append(
                f"  {t.label()}: {t.candidates} HyperNodes; {t.pruned} ruled out without a "
                f"trial, {tried} tried"
            )
            lines += [f"    {name}: {why}" for name, why in t.tried[:_LISTED]]
            if len(t.tried) > _LISTED:
                lines.append(f"    … and {len(t.tried) - _LISTED} more")
    for name, sub in sorted(trace.subgroups.items()):
        lines += _topology_lines(sub, f"sub-group {name}")
    return lines


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def to_table(ex: Explanation) -> str:
    lines = [
        f"pod {ex.pod}  (podgroup {ex.job}, queue {ex.queue})",
        f"verdict: {ex.verdict}",
        f"next session: {ex.session}",
    ]
    if ex.victims:
        lines.append(f"it would evict: {', '.join(ex.victims)}")
    elif ex.no_victims:
        lines.append(f"it would evict nothing: {ex.no_victims}")
    if ex.topology is not None:
        lines += _topology_lines(ex.topology)
    if ex.pre_filter:
        lines.append(f"pre-filter: {ex.pre_filter}")
    scorers = list(ex.weights)
    last = "WHY NOT / CARDS" if any(v.devices for v in ex.nodes) else "WHY NOT"
    header = ["NODE", "FITS", *(f"{s}×{ex.weights[s]}" for s in scorers), "TOTAL", last]
    rows = []
    ordered = sorted(ex.nodes, key=lambda v: (not v.fits, -(v.total or 0.0), v.node))
    for v in ordered:
        why = "; ".join(f"{f}: {', '.join(rs)}" for f, rs in v.reasons.items())
        if v.devices and v.fits:
            why = f"cards: {v.devices}"
        cells = [v.node, "yes" if v.fits else "no"]
        cells += [_num(v.scores[s]) if s in v.scores else "-" for s in scorers]
        cells += [_num(v.total) if v.total is not None else "-", why]
        rows.append(cells)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"
