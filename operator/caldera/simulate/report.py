"""What ``caldera simulate`` prints: a JSON document for tools, a table for people.

The JSON shape is an interface other tools depend on: ``binds``, ``evictions``, ``podGroups``
(Volcano's), ``queues`` (each with its weight, deserved share and allocation, in the table's
units), ``pods`` and ``unschedulable``; ``devices`` (every shared card with its usage) when some
node registers any; ``workloadPodGroups`` (Kubernetes' PodGroups, ``scheduling.k8s.io``:
scheduled or why not) when there are any; ``gateLifts`` (pods whose queue-allocation gate a cycle
lifted) and ``gated`` (pods still gated after the last cycle, with what they wait for) when some
pod uses those gates. Keys are sorted so equal input gives equal bytes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from caldera.cache.devices import device_usage
from caldera.cache.groups import VOLCANO_PODGROUPS, WORKLOAD_PODGROUPS
from caldera.devices.usage import CardState
from caldera.devices.vendors import VENDORS
from caldera.models.volcano import ALLOCATED_HYPERNODE_ANNOTATION
from caldera.quantity import format_resource
from caldera.simulate.runner import CycleRecord, Simulation

__all__ = ["to_json", "to_table"]


def _unschedulable(sim: Simulation) -> dict[str, str]:
    if not sim.cycles:
        return {}
    last = sim.cycles[-1].result
    return {f"{c.namespace}/{c.name}": c.message for c in last.pod_conditions}


def report(sim: Simulation) -> dict[str, Any]:
    state = sim.state
    doc = _core(sim, state)
    lifts = [
        {"pod": f"{g.namespace}/{g.name}", "queue": g.queue, "cycle": rec.cycle}
        for rec in sim.cycles
        for g in rec.result.gate_lifts
    ]
    last = sim.cycles[-1].result if sim.cycles else None
    workload = {
        f"{w.namespace}/{w.name}": {
            "scheduled": w.scheduled,
            "reason": w.reason,
            "message": w.message,
        }
        for w in (last.workload_groups if last else ())
    }
    if workload:  # only where Kubernetes' PodGroups (scheduling.k8s.io) are used
        doc["workloadPodGroups"] = dict(sorted(workload.items()))
    gated = last.gate_waits if last else {}
    if lifts or gated:  # only where queue-allocation gates are used
        doc["gateLifts"] = lifts
        doc["gated"] = dict(sorted(gated.items()))
    return doc


def _core(sim: Simulation, state: Any) -> dict[str, Any]:
    return {
        "binds": [
            {"pod": f"{b.namespace}/{b.name}", "node": b.node, "cycle": rec.cycle}
            for rec in sim.cycles
            for b in rec.result.binds
        ],
        "evictions": [
            {"pod": f"{e.namespace}/{e.name}", "reason": e.reason, "cycle": rec.cycle}
            for rec in sim.cycles
            for e in rec.result.evictions
        ],
        "podGroups": {
            key: {
                "phase": pg.status.phase,
                "running": pg.status.running,
                "succeeded": pg.status.succeeded,
                "failed": pg.status.failed,
                "conditions": [c.to_api() for c in pg.status.conditions],
                **(
                    {"hyperNode": pg.metadata.annotations[ALLOCATED_HYPERNODE_ANNOTATION]}
                    if ALLOCATED_HYPERNODE_ANNOTATION in pg.metadata.annotations
                    else {}
                ),
            }
            for key, pg in sorted(state.podgroups.items())
        },
        "queues": _queue_docs(sim),
        "pods": {
            key: {"annotations": dict(sorted(a.items()))}
            for key, a in sorted(sim.bind_annotations.items())
        },
        "unschedulable": dict(sorted(_unschedulable(sim).items())),
    }


def _shares(rec: CycleRecord) -> dict[str, tuple[dict[str, str] | None, dict[str, str] | None]]:
    """Queue → (deserved share, allocation) after one cycle, in the units both outputs show.
    A queue the session did not see, or one no plugin computes a share for, has None."""
    allocated = {q.name: q.allocated for q in rec.result.queues}
    deserved = rec.result.deserved
    return {n: (deserved.get(n), allocated.get(n)) for n in sorted(set(allocated) | set(deserved))}


def _queue_docs(sim: Simulation) -> dict[str, Any]:
    shares = _shares(sim.cycles[-1]) if sim.cycles else {}
    docs: dict[str, Any] = {}
    for name, q in sorted(sim.state.queues.items()):
        deserved, allocated = shares.get(name, (None, None))
        if allocated is None:
            allocated = {k: format_resource(k, v) for k, v in sorted(q.status.allocated.items())}
        docs[name] = {
            "state": q.status.state or "Open",
            "weight": q.spec.weight,
            "deserved": deserved,
            "allocated": allocated,
        }
    return docs


def _cards(sim: Simulation) -> list[CardState]:
    """Every shared card after the last cycle, with what the pods on it hold."""
    return device_usage(sim.state, VENDORS)[0]


def _card_doc(c: CardState) -> dict[str, Any]:
    return {
        "node": c.node,
        "vendor": c.vendor,
        "id": c.card.id,
        "type": c.card.type,
        "health": c.card.health,
        "slots": {"used": c.use.used, "total": c.card.count},
        "memoryMiB": {"used": c.use.usedmem, "total": c.card.devmem},
        "cores": {"used": c.use.usedcores, "total": c.card.devcore},
    }


def to_json(sim: Simulation) -> str:
    doc = report(sim)
    cards = _cards(sim)
    if cards:
        doc["devices"] = [_card_doc(c) for c in cards]
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _rows(
    header: tuple[str, ...], rows: Sequence[tuple[str, ...]], indent: str = "    "
) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    out = []
    for row in [header, *rows]:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)] + [row[-1]]
        out.append((indent + "  ".join(cells)).rstrip())
    return out


def _waiting(sim: Simulation, rec: CycleRecord) -> list[tuple[str, ...]]:
    """One row per PodGroup that this session marked Unschedulable."""
    rows: list[tuple[str, ...]] = []
    for st in rec.result.podgroups:
        cond = next(
            (
                c
                for c in st.conditions
                if c.type == "Unschedulable" and c.transition_id == rec.result.session_id
            ),
            None,
        )
        if cond is None:
            continue
        key = f"{st.namespace}/{st.name}"
        pg = sim.state.podgroups.get(key)
        queue = (pg.spec.queue or "default") if pg else "-"
        rows.append((key, queue, st.phase, cond.message))
    return rows


def _pod_why(message: str) -> str:
    """A pod's pending message; a gang's long message is already in the podgroup table."""
    if "tasks in gang unschedulable" in message:
        return "waits with its gang (see its PodGroup above)"
    return message


def to_table(sim: Simulation) -> str:
    lines: list[str] = []
    for rec in sim.cycles:
        res = rec.result
        lines.append(f"== cycle {rec.cycle} ==")
        lines.extend(f"  ! {problem}" for problem in rec.problems)
        if res.binds:
            lines.append(f"  bound {len(res.binds)} pod(s):")
            lines += _rows(
                ("POD", "NODE"), [(f"{b.namespace}/{b.name}", b.node) for b in res.binds]
            )
        else:
            lines.append("  bound nothing")
        if res.evictions:
            lines.append(f"  evicted {len(res.evictions)} pod(s):")
            lines += _rows(
                ("POD", "REASON"), [(f"{e.namespace}/{e.name}", e.reason) for e in res.evictions]
            )
        if res.gate_lifts:
            lines.append(f"  lifted the queue-allocation gate of {len(res.gate_lifts)} pod(s):")
            lines += _rows(
                ("POD", "QUEUE"), [(f"{g.namespace}/{g.name}", g.queue) for g in res.gate_lifts]
            )
        if res.gate_waits:
            lines.append(f"  gated {len(res.gate_waits)} pod(s):")
            lines += _rows(("POD", "WAITS FOR"), sorted(res.gate_waits.items()))
        waiting = _waiting(sim, rec)
        if waiting:
            lines.append(f"  waiting {len(waiting)} podgroup(s) ({VOLCANO_PODGROUPS}):")
            lines += _rows(("PODGROUP", "QUEUE", "PHASE", "WHY"), waiting)
        unscheduled = [
            (f"{w.namespace}/{w.name}", w.message) for w in res.workload_groups if not w.scheduled
        ]
        if unscheduled:
            lines.append(f"  waiting {len(unscheduled)} podgroup(s) ({WORKLOAD_PODGROUPS}):")
            lines += _rows(("PODGROUP", "WHY"), unscheduled)
        pending = [
            (f"{c.namespace}/{c.name}", c.reason, _pod_why(c.message))
            for c in res.pod_conditions
            if c.reason == "Unschedulable"
        ]
        if pending:
            lines.append(f"  pending {len(pending)} pod(s):")
            lines += _rows(("POD", "REASON", "WHY"), pending)
        shares = _shares(rec)
        if shares:
            lines.append("  queues:")
            rows = [
                (
                    name,
                    str(sim.state.queues[name].spec.weight) if name in sim.state.queues else "-",
                    _res(deserved),
                    _res(allocated),
                )
                for name, (deserved, allocated) in shares.items()
            ]
            lines += _rows(("QUEUE", "WEIGHT", "DESERVED", "ALLOCATED"), rows)
        lines.extend(
            f"  event {ev.kind} {ev.namespace}/{ev.name} {ev.reason}: {ev.message}"
            for ev in res.events
        )
        lines.append("")
    lines.append(f"== podgroups ({VOLCANO_PODGROUPS}) after the last cycle ==")
    pg_rows: list[tuple[str, ...]] = [
        (
            k,
            pg.status.phase or "-",
            str(pg.spec.min_member),
            str(pg.status.running),
            pg.spec.queue or "default",
        )
        for k, pg in sorted(sim.state.podgroups.items())
    ]
    if pg_rows:
        lines += _rows(("PODGROUP", "PHASE", "MINMEMBER", "RUNNING", "QUEUE"), pg_rows, indent="  ")
    cards = _cards(sim)
    if cards:
        lines.append("")
        lines.append("== shared devices after the last cycle ==")
        card_rows = [
            (
                c.node,
                c.card.id,
                c.card.type + ("" if c.card.health else " (unhealthy)"),
                f"{c.use.used}/{c.card.count}",
                f"{c.use.usedmem}/{c.card.devmem}",
                f"{c.use.usedcores}/{c.card.devcore}",
            )
            for c in cards
        ]
        lines += _rows(("NODE", "CARD", "TYPE", "SLOTS", "MEMORY MiB", "CORES %"), card_rows, "  ")
    return "\n".join(lines) + "\n"


def _res(values: dict[str, str] | None) -> str:
    if not values:
        return "-"
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
