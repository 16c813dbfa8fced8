"""``caldera explain``: for one pod, what the next session does with it and every node's verdict.

The verdict is the next session's, run on a copy of the cluster (its gang, its queue's share and
the pods placed before it included): bound to a node, or the message the pod's ``PodScheduled``
condition gets. The node table counts reasons as that message does (Volcano's ``FitErrors``,
:func:`~caldera.framework.placement.fit_errors`): when the session tried the pod on nodes and
none took it, the table is the nodes as the session saw them (``CycleResult.traced_nodes``), so
its reasons add up to the verdict's counts; otherwise it is the cluster as the next session
opens on it, the pod on its own. Scores are shown for the nodes that take the pod only: that is
the set kube-scheduler and Caldera score, and the batch scorers normalise over it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from caldera.api.hypernode import NO_RULE, TopologyTrace
from caldera.api.resources import Vector
from caldera.api.task import Task
from caldera.api.usage import NodeUsage
from caldera.cache.groups import group_label
from caldera.cache.queues import ensure_builtin_queues
from caldera.cache.snapshot import BuildMemo, build_snapshot, stable_uid
from caldera.cache.state import ClusterState
from caldera.framework.outside import DecisionFailed
from caldera.framework.placement import node_reasons
from caldera.framework.policy import Policy
from caldera.framework.registry import Registry
from caldera.framework.session import IntArray, Session
from caldera.models.volcano import GROUP_NAME_ANNOTATION, QUEUE_ALLOCATION_GATE
from caldera.plugins.deviceshare import DeviceSharePlugin
from caldera.plugins.deviceshare.verdicts import explain as device_verdict
from caldera.plugins.nodeorder import NodeOrderPlugin, per_row
from caldera.plugins.usage import ACTIVE
from caldera.simulate.progress import Progress
from caldera.simulate.runner import adopt_bare_pods, simulate
from caldera.simulate.usage_file import Reading, at

__all__ = ["ExplainError", "Explanation", "NodeVerdict", "explain", "to_json", "to_table"]

SEEN = "nodes as the session saw them when it last tried the pod"
"""The view when the session tried the pod and no node took it: the reasons its message counts."""
BEFORE = "nodes as they are before the session, the pod on its own"
"""The table's view otherwise (the pod is bound, or was never tried), counted the same way."""


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
    load: str = ""
    """The node's real load and its age, from the metrics (the usage plugin)."""

    @property
    def fits(self) -> bool:
        return not self.reasons


@dataclass(slots=True)
class Explanation:
    pod: str
    job: str
    queue: str
    verdict: str
    """What the next session would do with it: bind it to a node, or the PodScheduled message
    it would get (its gang's, its queue's...): the one answer to "why is it pending?"."""
    view: str
    """Which cluster the node table shows (:data:`SEEN` or :data:`BEFORE`)."""
    chosen: str | None
    pre_filter: str | None
    nodes: list[NodeVerdict]
    weights: dict[str, int]
    victims: list[str] = field(default_factory=list)
    """Pods the next session's preempt or reclaim would evict to make room for it."""
    no_victims: str = ""
    """Why preempt or reclaim would evict nothing for it (empty: they did not try)."""
    victim_nodes: dict[str, str] = field(default_factory=dict)
    """Node → why preempt or reclaim could not make room for it there (the nodes they tried
    or ruled out, as many as the session kept)."""
    topology: TopologyTrace | None = None
    """The next session's HyperNode search for the pod's job (jobs with network topology)."""
    taken: str = ""
    """When the table shows nodes the pod fits and the session does not place it: which pods
    the session placed on those nodes first."""


class ExplainError(ValueError):
    """The pod cannot be explained (unknown, not ours, already bound)."""


def _find(ssn: Session, key: str) -> Task:
    for job in ssn.jobs.values():
        for task in job.tasks.values():
            if f"{task.namespace}/{task.name}" == key:
                return task
    raise ExplainError(f"pod {key} is not a pending pod of this scheduler")


def _scores(
    ssn: Session, task: Task, feasible: IntArray, weights: dict[str, int]
) -> Iterator[tuple[str, Vector]]:
    """Every part of the total the session ranks nodes by, weighted: nodeorder's scorers one by
    one (their weights go to ``weights``), and each other plugin's node score under its name."""
    nodeorder = next((p for p in ssn.plugins if isinstance(p, NodeOrderPlugin)), None)
    shown = False
    for plugin, scorer in ssn.node_order_point.named():
        if nodeorder is None or plugin != nodeorder.name:
            yield plugin, per_row(scorer.fn(task, feasible), len(feasible))
        elif not shown:  # nodeorder registers its scorers summed, in groups
            shown = True
            for part in nodeorder.scorers:
                weights[part.name] = part.weight
                yield part.name, per_row(part.fn(task, feasible), len(feasible)) * part.weight


def explain(
    state: ClusterState,
    policy: Policy,
    registry: Registry,
    pod: str,
    *,
    scheduler_names: Iterable[str],
    default_queue: str = "default",
    source: str = "the manifests",
    progress: Progress | None = None,
    node_usage: Mapping[str, Reading] | None = None,
    after: int = 0,
) -> Explanation:
    """Where the next session puts ``pod``, and every node's filter verdicts and scores for it;
    ``source`` names where the objects came from (for the error when the pod is not among them);
    ``progress`` (shown on a terminal only) follows that session. With ``after``, that many
    sessions run first, their decisions applied to ``state`` as ``simulate`` applies them."""
    shown = progress or Progress()
    try:
        names = list(scheduler_names)
        if after:
            simulate(
                state,
                policy,
                registry,
                scheduler_names=names,
                cycles=after,
                default_queue=default_queue,
                progress=shown,
                node_usage=node_usage,
            )
        args = (default_queue, shown, source, node_usage or {})
        return _explain(state, policy, registry, pod, names, *args)
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
    source: str,
    node_usage: Mapping[str, Reading],
) -> Explanation:
    key = pod if "/" in pod else f"default/{pod}"
    found = state.pods.get(key)
    if found is None:
        raise ExplainError(f"pod {key} is not in {source}")
    if found.spec.node_name:
        raise ExplainError(f"pod {key} is already bound to {found.spec.node_name}")
    if found.spec.scheduler_name not in names:
        raise ExplainError(
            f"pod {key} has schedulerName {found.spec.scheduler_name!r}, not {' or '.join(names)}"
        )
    ensure_builtin_queues(state, default_queue, created=0.0)
    adopt_bare_pods(state, names)
    memo = BuildMemo()  # the session's snapshot and the table's share the pods' requests
    next_ = _next_session(
        state, policy, registry, key, names, default_queue, progress, memo, node_usage
    )
    progress.show(f"explaining {key}: every node's filters and scores")
    snapshot, _ = build_snapshot(
        state,
        scheduler_names=names,
        now=0.0,
        session_id=stable_uid("Session", "explain"),
        default_queue=default_queue,
        memo=memo,
        managed_resources=policy.managed_resources,
    )
    snapshot.node_usage = at(node_usage, snapshot.now)
    ssn = Session(snapshot, policy, registry)
    ssn.open()
    held = snapshot.held.get(key)
    task = held[0] if held is not None else _find(ssn, key)
    job = ssn.jobs.get(task.job)
    group = found.metadata.annotations.get(GROUP_NAME_ANNOTATION, "")
    nodes = ssn.nodes
    verdicts = [
        NodeVerdict(name, load=_load(snapshot.node_usage.get(name), snapshot.now))
        for name in nodes.names
    ]

    pre = ssn.pre_predicate(task)
    counted = next_.nodes  # the nodes as the session saw them when it last tried the pod
    notes = next_.notes if counted else {}
    if pre is not None:
        counted = {v.node: [("PreFilter", pre)] for v in verdicts}
    elif not counted:
        counted = node_reasons(ssn, task).nodes
    cards = next((p for p in ssn.plugins if isinstance(p, DeviceSharePlugin)), None)
    for index, node in enumerate(verdicts):
        for origin, reason in counted.get(node.node, []):
            node.reasons.setdefault(origin, []).append(reason)
        said = device_verdict(cards.state, task, index) if cards and cards.state else None
        seen = notes.get(node.node)
        if said is not None and said[0] and node.fits:
            node.devices = said[1]
        elif cards is not None and cards.name in node.reasons:  # each card tried, and why:
            if seen is not None:  # as the session tried them
                node.reasons[cards.name] = [seen]
            elif said is not None and not said[0]:  # as they are now
                node.reasons[cards.name] = [said[1]]
    feasible = np.array([i for i, v in enumerate(verdicts) if v.fits], dtype=np.intp)
    weights: dict[str, int] = {}
    if pre is None and len(feasible):
        with contextlib.suppress(DecisionFailed):  # the verdict says why
            for name, values in _scores(ssn, task, feasible, weights):
                for row, value in zip(feasible, values.tolist(), strict=True):
                    verdicts[row].scores[name] = value
            totals = ssn.node_order(task, feasible)
            for row, value in zip(feasible, totals.tolist(), strict=True):
                verdicts[row].total = value
    return Explanation(
        pod=key,
        job=task.job or f"{found.metadata.namespace}/{group}",
        queue=job.queue if job is not None else "-",
        verdict=next_.text,
        view=SEEN if next_.nodes else BEFORE,
        victims=next_.victims,
        no_victims=next_.no_victims,
        victim_nodes=next_.victim_nodes,
        topology=next_.topology,
        taken=_taken(next_, {v.node for v in verdicts if v.fits}),
        chosen=next(
            (node for pod_key, node in next_.binds if pod_key == key and next_.bound), None
        ),
        pre_filter=pre,
        nodes=verdicts,
        weights=weights,
    )


@dataclass(slots=True)
class _Next:
    """What the next session does with the pod (see :func:`_next_session`)."""

    text: str
    victims: list[str]
    no_victims: str
    victim_nodes: dict[str, str]
    topology: TopologyTrace | None
    bound: bool
    binds: list[tuple[str, str]]
    """Every bind of the session: (pod, node)."""
    nodes: dict[str, list[tuple[str, str]]]
    """Node → the (filter, reason) pairs the pod's message counts (empty: no such message)."""
    notes: dict[str, str]  # node → deviceshare's word on its cards (``traced_notes``)


def _next_session(
    state: ClusterState,
    policy: Policy,
    registry: Registry,
    key: str,
    names: list[str],
    default_queue: str,
    progress: Progress,
    memo: BuildMemo,
    node_usage: Mapping[str, Reading],
) -> _Next:
    """One full session on a copy of ``state``: where it binds the pod, or the pod's message;
    the pods it evicts to make room for it; when it evicts none, why (if preempt or reclaim
    tried); its job's HyperNode search; and what else the session bound."""
    copy = replace(state, **{f.name: dict(getattr(state, f.name)) for f in fields(state)})
    sim = simulate(
        copy,
        policy,
        registry,
        scheduler_names=names,
        default_queue=default_queue,
        progress=progress,
        memo=memo,
        node_usage=node_usage,
        trace=key,
    )
    result = sim.cycles[0].result
    victims = sorted(
        f"{e.namespace}/{e.name} ({e.reason})" for e in result.evictions if e.preemptor == key
    )
    note = "" if victims else result.preemption_notes.get(key, "")
    per_node = {} if victims else dict(result.preemption_nodes.get(key, {}))
    pod = copy.pods[key]
    group = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION, "")
    trace = result.topology.get(f"{pod.metadata.namespace}/{group}")
    binds = [(f"{b.namespace}/{b.name}", b.node) for b in result.binds]
    text = "not considered (its PodGroup is not enqueued or not valid)"
    if victims:
        text = "pipelined onto the room its victims free; bound once they are gone"
    for cond in result.pod_conditions:
        if f"{cond.namespace}/{cond.name}" == key:
            text = f"{cond.reason}: {cond.message}"
    lift = next((g for g in result.gate_lifts if f"{g.namespace}/{g.name}" == key), None)
    if lift is not None:
        text = (
            f"its {QUEUE_ALLOCATION_GATE} gate is lifted: queue {lift.queue} has room for it "
            "(the session after places it)"
        )
    elif key in result.gate_waits:
        text = f"stays gated by {QUEUE_ALLOCATION_GATE}: {result.gate_waits[key]}"
    for pod_key, node in binds:
        if pod_key == key:
            return _Next(f"bound to {node}", victims, note, per_node, trace, True, binds, {}, {})
    nodes, notes = result.traced_nodes, result.traced_notes
    return _Next(text, victims, note, per_node, trace, False, binds, nodes, notes)


def _taken(next_: _Next, fitting: set[str]) -> str:
    """When the table shows nodes the pod fits but the session does not bind it: the pods the
    session placed first on those nodes ("" when none did, or the pod is bound)."""
    if next_.bound or not fitting:
        return ""
    earlier = [f"{pod} on {node}" for pod, node in next_.binds if node in fitting]
    if not earlier:
        return ""
    shown = ", ".join(earlier[:_LISTED]) + (
        f" and {len(earlier) - _LISTED} more" if len(earlier) > _LISTED else ""
    )
    return (
        f"the table is the cluster before this session; in it, {len(earlier)} pod(s) placed "
        f"before this one took room on the nodes it fits: {shown}"
    )


def to_json(ex: Explanation) -> str:
    doc: dict[str, Any] = {
        "pod": ex.pod,
        "podGroup": ex.job,
        "queue": ex.queue,
        "verdict": ex.verdict,
        "view": ex.view,
        "victims": ex.victims,
        "takenBy": ex.taken or None,
        "noVictims": ex.no_victims or None,
        "noVictimsByNode": ex.victim_nodes or None,
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
                **({"load": v.load} if v.load else {}),
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


def _load(usage: NodeUsage | None, now: float) -> str:
    """``cpu 45% mem 60% (30s old)``; ``(stale)`` past the 5 minutes the usage plugin trusts."""
    if usage is None or usage.measured is None:
        return ""
    age = max(now - usage.measured, 0.0)
    stale = ", stale" if age > ACTIVE else ""
    return f"cpu {usage.cpu:.0f}% mem {usage.memory:.0f}% ({_age(age)} old{stale})"


def _age(seconds: float) -> str:
    return f"{seconds / 60:.0f}m" if seconds >= 120 else f"{seconds:.0f}s"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def _heading(ex: Explanation, scorer: str) -> str:
    """``scorer×weight`` for nodeorder's scorers; a plugin's own score is weighted already."""
    return f"{scorer}×{ex.weights[scorer]}" if scorer in ex.weights else scorer


def to_table(ex: Explanation) -> str:
    lines = [
        f"pod {ex.pod}  ({group_label(ex.job)}, queue {ex.queue})",
        f"verdict: {ex.verdict}",
    ]
    if ex.taken:
        lines.append(ex.taken)
    if ex.victims:
        lines.append(f"it would evict: {', '.join(ex.victims)}")
    elif ex.no_victims:
        lines.append(f"it would evict nothing: {ex.no_victims}")
    if not ex.victims:
        lines += [f"  {node}: {why}" for node, why in sorted(ex.victim_nodes.items())]
    if ex.topology is not None:
        lines += _topology_lines(ex.topology)
    if ex.pre_filter:
        lines.append(f"pre-filter: {ex.pre_filter}")
    lines.append(f"{ex.view}:")
    scorers = list(ex.weights)
    scorers += sorted({s for v in ex.nodes for s in v.scores} - set(scorers))
    last = "WHY NOT / CARDS" if any(v.devices for v in ex.nodes) else "WHY NOT"
    loads = any(v.load for v in ex.nodes)
    header = ["NODE", "FITS", *(["LOAD"] if loads else []), *(_heading(ex, s) for s in scorers)]
    header += ["TOTAL", last]
    rows = []
    ordered = sorted(ex.nodes, key=lambda v: (not v.fits, -(v.total or 0.0), v.node))
    for v in ordered:
        why = "; ".join(f"{f}: {', '.join(rs)}" for f, rs in v.reasons.items())
        if v.devices and v.fits:
            why = f"cards: {v.devices}"
        cells = [v.node, "yes" if v.fits else "no", *([v.load or "-"] if loads else [])]
        cells += [_num(v.scores[s]) if s in v.scores else "-" for s in scorers]
        cells += [_num(v.total) if v.total is not None else "-", why]
        rows.append(cells)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"
