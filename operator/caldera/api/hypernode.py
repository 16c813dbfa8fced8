"""The HyperNode tree: which network domain, at every tier, each node belongs to.

Built once per snapshot from the HyperNode objects. Members are resolved against the nodes by exact
name, regex (unanchored, as Go's ``regexp.MatchString``) or label selector; HyperNode members nest
a domain in another. What the CRD cannot rule out is reported on the HyperNode at fault and
ignored, never raised:

- a member of an unknown type, a regex that does not compile, a label selector on a HyperNode
  member, or a HyperNode member that does not exist: that member is ignored;
- a cycle of HyperNode members: every HyperNode on it is ignored;
- a member HyperNode whose tier is not below its parent's: that membership is ignored;
- a node in two HyperNodes of one tier: the HyperNode whose name sorts later is ignored (so each
  node has at most one domain per tier, which is what makes the arrays below possible).

For the engine the tree is a handful of arrays: per tier, the domain (HyperNode index) of every
node row, or -1; per HyperNode, its node rows and tier. Node counts for the HyperNode status are
over every node the cluster has, Ready or not, as Volcano's controller counts them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from caldera.api.node import Matrix, NodeTable
from caldera.models.topology import HyperNode, HyperNodeMember

__all__ = [
    "NO_RULE",
    "HyperNodeTree",
    "HyperNodeUsage",
    "Problem",
    "TierTrial",
    "TopologyTrace",
    "build_tree",
]

IntArray = npt.NDArray[np.intp]


@dataclass(slots=True)
class HyperNodeTree:
    names: list[str]
    tier: IntArray
    """Tier of each HyperNode (lower is better locality)."""
    tier_names: dict[int, str]
    """A tier's name (``spec.tierName`` of its HyperNodes), where one is given."""
    rows: list[IntArray]
    """Node-table rows under each HyperNode (transitively), sorted."""
    domain: dict[int, IntArray]
    """Per tier, the index of the HyperNode of that tier holding each node row, or -1."""
    node_counts: dict[str, int] = field(default_factory=dict)
    """Per HyperNode kept in the tree, the nodes under it among every node of the cluster."""
    stale_counts: dict[str, int] = field(default_factory=dict)
    """The node counts that differ from the HyperNodes' ``status.nodeCount``."""
    index: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = {name: i for i, name in enumerate(self.names)}

    @property
    def tiers(self) -> list[int]:
        """The tiers that have HyperNodes, lowest first."""
        return sorted(self.domain)

    def __len__(self) -> int:
        return len(self.names)

    def at_tier(self, tier: int) -> IntArray:
        """Indices of the HyperNodes of ``tier``, in name order."""
        return np.flatnonzero(self.tier == tier)

    def tier_of_name(self, name: str) -> int | None:
        for tier, tier_name in self.tier_names.items():
            if tier_name == name:
                return tier
        return None

    def holding(self, rows: IntArray, tier: int) -> int:
        """The HyperNode of ``tier`` holding every one of ``rows`` (-1: none does)."""
        dom = self.domain.get(tier)
        if dom is None or len(rows) == 0:
            return -1
        first = int(dom[rows[0]])
        return first if first >= 0 and bool((dom[rows] == first).all()) else -1

    def lowest_holding(self, rows: IntArray, highest: int | None = None) -> int:
        """The lowest-tier HyperNode (of tier ≤ ``highest``, if given) holding every one of
        ``rows`` (-1: none does)."""
        for tier in self.tiers:
            if highest is not None and tier > highest:
                break
            holder = self.holding(rows, tier)
            if holder >= 0:
                return holder
        return -1


class HyperNodeUsage:
    """Per HyperNode, the sums of its nodes' allocatable and ``future_idle``, kept current for a
    session from the node table's change log (each changed row's delta is added to the HyperNode
    of every tier holding it: O(changed rows × tiers), not O(nodes))."""

    __slots__ = ("_nodes", "_rows_free", "_seen", "_tree", "allocatable", "free_sum")

    def __init__(self, tree: HyperNodeTree, nodes: NodeTable) -> None:
        self._tree = tree
        self._nodes = nodes
        width = nodes.allocatable.shape[1]
        self.allocatable: Matrix = np.zeros((len(tree), width))
        self.free_sum: Matrix = np.zeros((len(tree), width))
        for i, rows in enumerate(tree.rows):
            self.allocatable[i] = nodes.allocatable[rows].sum(axis=0)
            self.free_sum[i] = nodes.future_idle[rows].sum(axis=0)
        self._rows_free: Matrix = nodes.future_idle.copy()
        self._seen = len(nodes.changes)

    def free(self) -> Matrix:
        """Per HyperNode, the sum of its nodes' ``future_idle``."""
        nodes = self._nodes
        if self._seen != len(nodes.changes):
            rows = np.unique(np.asarray(nodes.changes[self._seen :], dtype=np.intp))
            self._seen = len(nodes.changes)
            delta = nodes.future_idle[rows] - self._rows_free[rows]
            self._rows_free[rows] = nodes.future_idle[rows]
            for dom in self._tree.domain.values():
                d = dom[rows]
                keep = d >= 0
                np.add.at(self.free_sum, d[keep], delta[keep])
        return self.free_sum

    def used(self) -> Matrix:
        """Per HyperNode, what its nodes hold or have promised (allocatable − free)."""
        out: Matrix = self.allocatable - self.free()
        return out


ROOM = "room for "
"""How a HyperNode ruled out for fragmentation is described: ``room for <n> of <m> pods``."""
_ROOMY = "no room for all the pods"


def _category(why: str) -> str:
    """A reason without its numbers, to count HyperNodes alike in a one-line summary."""
    if why.startswith(ROOM):
        return _ROOMY
    return why.split(" (")[0]


@dataclass(slots=True)
class TierTrial:
    """What the search did at one tier."""

    tier: int
    name: str = ""
    candidates: int = 0
    pruned: int = 0
    """HyperNodes ruled out without a trial (not enough free resources or room for the pods)."""
    tried: list[tuple[str, str]] = field(default_factory=list)
    """(HyperNode, why it did not take the job), pruned ones first."""
    note: str = ""
    most_room: int = -1
    """Of the HyperNodes ruled out for too little room, the most pods one could take."""

    def label(self) -> str:
        return f"tier {self.tier}" + (f" ({self.name})" if self.name else "")

    def summary(self) -> str:
        if self.note:
            return f"{self.label()}: {self.note}"
        if not self.candidates:
            return f"{self.label()}: no HyperNode"
        reasons: dict[str, int] = {}
        for _, why in self.tried:
            reasons[_category(why)] = reasons.get(_category(why), 0) + 1
        top = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        text = "; ".join(
            f"{n} × {why}" + (f" (at most {self.most_room})" if why == _ROOMY else "")
            for why, n in top[:3]
        )
        more = len(top) - 3
        return f"{self.label()}: {self.candidates} HyperNodes, none fits ({text}" + (
            f"; {more} other reasons)" if more > 0 else ")"
        )


NO_RULE = "none"
"""The rule of a job without a network topology of its own (only its sub-groups have one)."""


@dataclass(slots=True)
class TopologyTrace:
    """The HyperNode search for one job in one session."""

    rule: str
    tiers: list[TierTrial] = field(default_factory=list)
    chosen: str = ""
    """The HyperNode the job was placed in ("" while it waits, or placed outside any)."""
    outside: bool = False
    """Soft mode, and no HyperNode could hold the job: it was placed across the cluster."""
    subgroups: dict[str, TopologyTrace] = field(default_factory=dict)
    """The searches of the job's sub-groups with a network topology of their own."""

    def summary(self) -> str:
        tiers = "; ".join(t.summary() for t in self.tiers) or "no tier within the bound"
        return f"network topology ({self.rule}): no HyperNode can hold the job: {tiers}"


Problem = tuple[str, str]
"""(HyperNode name, what is wrong with it)."""


def build_tree(
    hypernodes: Mapping[str, HyperNode],
    node_labels: Mapping[str, Mapping[str, str]],
    rows: Mapping[str, int],
    n_rows: int,
) -> tuple[HyperNodeTree, list[Problem]]:
    """The tree of ``hypernodes`` over the cluster's nodes (name → labels); ``rows`` maps the
    names of the nodes in the session's node table to their rows."""
    problems: list[Problem] = []
    node_names = tuple(sorted(node_labels))
    hn_names = tuple(sorted(hypernodes))
    hn_set = frozenset(hn_names)

    def by_regex(kind: str, pattern: str) -> tuple[str, ...] | None:
        """Names of ``kind`` matching ``pattern`` (None: it does not compile)."""
        return _matching(pattern, node_names if kind == "Node" else hn_names)

    direct_nodes: dict[str, set[str]] = {}
    children: dict[str, list[str]] = {}
    for name in hn_names:
        nodes: set[str] = set()
        kids: list[str] = []
        for i, member in enumerate(hypernodes[name].spec.members):
            found = _resolve(member, node_names, node_labels, hn_names, hn_set, by_regex)
            if isinstance(found, str):
                problems.append((name, f"spec.members[{i}]: {found}; member ignored"))
            elif member.type == "Node":
                nodes.update(found)
            else:
                kids.extend(k for k in found if k != name or _self_loop(problems, name, i))
        direct_nodes[name] = nodes
        children[name] = list(dict.fromkeys(kids))

    dropped = _cycles(children, problems)
    tier = {name: hypernodes[name].spec.tier for name in hn_names}
    members: dict[str, set[str]] = {}
    claimed: dict[int, dict[str, str]] = {}
    for name in sorted((n for n in hn_names if n not in dropped), key=lambda n: (tier[n], n)):
        nodes = set(direct_nodes[name])
        for kid in children[name]:
            if kid in dropped:
                continue
            if tier[kid] >= tier[name]:
                problems.append(
                    (
                        name,
                        (
                            f"member HyperNode {kid} has tier {tier[kid]}, not below this "
                            f"HyperNode's tier {tier[name]}; member ignored"
                        ),
                    )
                )
                continue
            nodes |= members.get(kid, set())
        taken = claimed.setdefault(tier[name], {})
        clash = sorted(n for n in nodes if n in taken)
        if clash:
            problems.append(
                (
                    name,
                    (
                        f"node {clash[0]} is also in HyperNode {taken[clash[0]]} of tier "
                        f"{tier[name]}; this HyperNode is ignored"
                    ),
                )
            )
            dropped.add(name)
            continue
        taken.update(dict.fromkeys(nodes, name))
        members[name] = nodes

    kept = sorted(members, key=lambda n: (tier[n], n))
    node_rows = [
        np.array(sorted(rows[n] for n in members[name] if n in rows), dtype=np.intp)
        for name in kept
    ]
    tiers = np.array([tier[n] for n in kept], dtype=np.intp)
    domain: dict[int, IntArray] = {}
    for i, r in enumerate(node_rows):
        dom = domain.setdefault(int(tiers[i]), np.full(n_rows, -1, dtype=np.intp))
        dom[r] = i
    tier_names: dict[int, str] = {}
    for name in kept:
        spec = hypernodes[name].spec
        if spec.tier_name:
            tier_names.setdefault(spec.tier, spec.tier_name)
    tree = HyperNodeTree(
        names=kept,
        tier=tiers,
        tier_names=tier_names,
        rows=node_rows,
        domain=domain,
        node_counts={name: len(members[name]) for name in kept},
    )
    tree.stale_counts = {
        name: count
        for name, count in tree.node_counts.items()
        if hypernodes[name].status.node_count != count
    }
    return tree, problems


@functools.lru_cache(maxsize=1024)
def _matching(pattern: str, names: tuple[str, ...]) -> tuple[str, ...] | None:
    """The ``names`` ``pattern`` finds (None: it does not compile). Remembered across sessions:
    a leaf per rack selected by regex is hundreds of patterns over thousands of node names, the
    same every session until a node or a HyperNode changes."""
    try:
        rx = re.compile(pattern)
    except re.error:
        return None
    return tuple(n for n in names if rx.search(n))


def _self_loop(problems: list[Problem], name: str, i: int) -> bool:
    problems.append((name, f"spec.members[{i}]: a HyperNode cannot be its own member; ignored"))
    return False


def _resolve(
    member: HyperNodeMember,
    node_names: Sequence[str],
    node_labels: Mapping[str, Mapping[str, str]],
    hn_names: Sequence[str],
    hn_set: Container[str],
    by_regex: Callable[[str, str], tuple[str, ...] | None],
) -> Sequence[str] | str:
    """The names a member selects, or why it selects nothing usable."""
    sel = member.selector
    if sel is None:
        return "no selector"
    if sel.unusable_label_match:
        return sel.unusable_label_match
    if member.type == "Node":
        known: Container[str] = node_labels
    elif member.type == "HyperNode":
        known = hn_set
        if sel.label_match is not None:
            return "labelMatch applies only to members of type Node"
    else:
        return f"type {member.type!r} is not Node or HyperNode"
    if sel.exact_match is not None:
        name = sel.exact_match.name
        if name in known:
            return [name]
        return [] if member.type == "Node" else f"HyperNode {name} does not exist"
    if sel.regex_match is not None:
        found = by_regex(member.type, sel.regex_match.pattern)
        if found is None:
            return f"regexMatch.pattern {sel.regex_match.pattern!r} does not compile"
        return found
    assert sel.label_match is not None
    return [n for n in node_names if sel.label_match.matches(node_labels[n])]


def _cycles(children: Mapping[str, Sequence[str]], problems: list[Problem]) -> set[str]:
    """HyperNodes on a cycle of memberships (each reported once)."""
    on_cycle: set[str] = set()
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        path.append(name)
        for kid in children.get(name, ()):
            if kid not in children:
                continue
            if state.get(kid) == 1:
                cycle = path[path.index(kid) :]
                text = " → ".join([*cycle, kid])
                for member in cycle:
                    if member not in on_cycle:
                        on_cycle.add(member)
                        problems.append(
                            (member, f"HyperNode members form a cycle ({text}); ignored")
                        )
            elif kid not in state:
                visit(kid, path)
        path.pop()
        state[name] = 2

    for name in sorted(children):
        if name not in state:
            visit(name, [])
    return on_cycle
