"""InterPodAffinity score (``podaffinity.weight``), with kube-scheduler's sums and normalisation.

A node's raw score is the sum, over the domains the node belongs to, of:

- ``+weight`` for every placed pod in the domain matching one of the pod's preferred affinity
  terms, ``-weight`` for one of its preferred anti-affinity terms;
- for every placed pod in the domain owning a term that matches this pod (namespaces as that pod
  reads them): ``+hard_weight`` per required affinity term (kube's ``hardPodAffinityWeight``),
  ``+weight`` per preferred affinity term, ``-weight`` per preferred anti-affinity term.

kube-scheduler defaults ``hardPodAffinityWeight`` to 1, but Volcano's nodeorder builds the plugin
from empty ``InterPodAffinityArgs`` (weight 0), so existing pods' required affinity does not
score there. Caldera is Volcano's drop-in and uses 0; :func:`pod_affinity_scorer` takes the
weight, so kube's behaviour is one argument away (and is tested).

NormalizeScore then maps the raw scores of the candidate nodes onto 0..100:
``trunc(100 · (s − min) / (max − min))``, and 0 everywhere when all are equal.

Complexity per task: O((W + K)·C) numpy work for W preferred terms of the pod and K topology
keys of matching placed pods' terms over C candidates, plus O(T·D) to sum the T distinct
matching owned terms over D domains (:class:`PodIndex`, kept current by events).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from caldera.api.resources import Vector
from caldera.api.task import Task
from caldera.framework.interfaces import IntArray, SessionView
from caldera.models.core import Affinity, PodAffinity
from caldera.plugins.interpod_state import OwnedTerms, PodIndex, Term, terms_of

__all__ = ["normalize", "pod_affinity_scorer"]

MAX = 100.0
PLUGIN = "nodeorder"
Scorer = Callable[[Task, IntArray], Vector | float]
PodKey = tuple[str, frozenset[tuple[str, str]], Affinity | None]


def _weighted(task: Task, affinity: PodAffinity | None, sign: int) -> list[tuple[Term, int]]:
    if affinity is None:
        return []
    preferred = affinity.preferred_during_scheduling_ignored_during_execution
    terms = terms_of(task.namespace, task.labels, [w.pod_affinity_term for w in preferred])
    return [(t, sign * w.weight) for t, w in zip(terms, preferred, strict=True)]


def _preferred(task: Task) -> list[tuple[Term, int]]:
    aff = task.spec.affinity
    if aff is None:
        return []
    return _weighted(task, aff.pod_affinity, 1) + _weighted(task, aff.pod_anti_affinity, -1)


def _owned(hard_weight: int) -> OwnedTerms:
    def owned(task: Task) -> list[tuple[Term, int]]:
        aff = task.spec.affinity
        out = _preferred(task)
        if hard_weight > 0 and aff is not None and aff.pod_affinity is not None:
            required = aff.pod_affinity.required_during_scheduling_ignored_during_execution
            out += [(t, hard_weight) for t in terms_of(task.namespace, task.labels, required)]
        return out

    return owned


def normalize(raw: Vector) -> Vector:
    """kube's NormalizeScore for InterPodAffinity over the candidates' raw scores."""
    if len(raw) == 0:
        return raw
    low, high = raw.min(), raw.max()
    if high <= low:
        return np.zeros(len(raw), dtype=np.float64)
    scores: Vector = np.trunc(MAX * ((raw - low) / (high - low)))
    return scores


def pod_affinity_scorer(ssn: SessionView, hard_weight: int = 0) -> Scorer:
    """The scorer; registers its event handler on ``ssn`` so its counts follow placements."""
    index = PodIndex(ssn.nodes, ssn.snapshot.labels_of_namespace, _owned(hard_weight))
    ssn.event_handlers.add(PLUGIN, index.handler)
    preferred: dict[PodKey, list[tuple[Term, int]]] = {}

    def score(task: Task, idx: IntArray) -> Vector | float:
        key: PodKey = (task.namespace, frozenset(task.labels.items()), task.spec.affinity)
        own = preferred.get(key)
        if own is None:
            own = preferred[key] = _preferred(task)
        owned = index.owned_by_key(task.namespace, task.labels)
        if not own and not owned:
            return 0.0  # no term applies: every raw score is 0, which normalises to 0
        raw = np.zeros(len(idx), dtype=np.int64)
        for term, weight in own:
            counts = index.matching((term.match,), term.topology_key)
            raw += weight * counts[index.domains(term.topology_key)[idx]]
        for topology_key, counts in owned.items():
            raw += counts[index.domains(topology_key)[idx]]
        return normalize(raw.astype(np.float64))

    return score
