"""The scheduler's cache: the watched objects as validated models, kept current from watch events.

Each kind's informer hands its listing and then its events here. An object is parsed into its
model (for pods and nodes a slim record) only when something the scheduler reads changed: for
pods and nodes — by far the most frequent events, mostly kubelet status updates and heartbeats —
the fields that matter are compared first (:func:`fingerprint`, as 16-byte digests, so no second
copy of them is kept), and an event that changes none of them is dropped before any parsing. A malformed object is reported once (log line and callback) and left out.

The cache also decides which changes are *news* for the scheduler — a pending pod of ours
appearing, capacity freed, a node or a queue changing — and calls ``on_news`` for those, which
starts a session; the scheduler's own writes coming back (a bind confirmed, a status written) are
stored but are not news. It records which keys changed since :meth:`take_changes` was last
called, so the session process is sent only those. Nothing here blocks: every method is a few
dictionary operations per event.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import orjson

from caldera.cache.state import Changes, ClusterState
from caldera.devices.vendors import VENDORS
from caldera.models.core import FINISHED_PHASES, Pod
from caldera.models.kinds import KINDS, Kind
from caldera.models.parse import ObjectError, parse_object
from caldera.operator.logs import about

__all__ = ["Cache", "digest", "fingerprint"]

log = logging.getLogger(__name__)

Raw = Mapping[str, Any]


def _condition(conditions: Any, kind: str) -> tuple[Any, ...] | None:
    for c in conditions or ():
        if isinstance(c, Mapping) and c.get("type") == kind:
            return (c.get("status"), c.get("reason"), c.get("message"))
    return None


NODE_ANNOTATIONS = frozenset(
    key
    for vendor in VENDORS
    for key in (vendor.register_annotation, vendor.cordon_annotation, vendor.score_annotation)
    if key
)
"""The node annotations a session reads: the shared-device registrations."""
ASSIGNMENT_ANNOTATIONS = frozenset(key for vendor in VENDORS for key in vendor.keys.written)
"""Pod annotations the binder writes (a card assignment): on a pending pod, not news."""


def digest(value: Any) -> bytes | None:
    """A 16-byte stand-in for one part of an object (its JSON's BLAKE2b digest), so that the
    cache can tell whether the part changed without keeping it: a real pod's spec, with its env
    and volumes, is kilobytes as dicts."""
    if value is None:
        return None
    return hashlib.blake2b(orjson.dumps(value), digest_size=16).digest()


def fingerprint(kind: Kind, raw: Raw) -> tuple[Any, ...] | None:
    """What the scheduler reads of a pod, a node or a selector-only kind, as digests (None for
    other kinds: always parsed)."""
    meta = raw.get("metadata") or {}
    status = raw.get("status") or {}
    if kind.selector_only:  # a ReplicaSet's status churn, a Service's ports: nothing read
        return (meta.get("uid"), digest((raw.get("spec") or {}).get("selector")))
    if kind.name == "Pod":
        spec = raw.get("spec") or {}
        return (
            meta.get("uid"),
            digest(meta.get("labels")),
            digest(meta.get("annotations")),
            meta.get("deletionTimestamp"),
            digest(meta.get("ownerReferences")),
            spec.get("nodeName"),
            digest({k: v for k, v in spec.items() if k != "nodeName"}),
            status.get("phase"),
            _condition(status.get("conditions"), "PodScheduled"),
            digest(status.get("resourceClaimStatuses")),
        )
    if kind.name == "Node":
        notes = meta.get("annotations") or {}
        return (
            meta.get("uid"),
            digest(meta.get("labels")),
            # only the device registrations: a node lock or a heartbeat changes nothing read
            digest({k: notes[k] for k in NODE_ANNOTATIONS if k in notes})
            if isinstance(notes, dict)
            else digest(notes),
            digest(raw.get("spec")),
            digest(status.get("allocatable")),
            (_condition(status.get("conditions"), "Ready") or (None,))[0],
            digest(status.get("images")),
        )
    return None


def _wakes(raw: Raw) -> tuple[Any, ...]:
    """What must change in an object of a kind other than Pod for a session to care: anything
    but its status (the scheduler writes PodGroup and Queue status itself)."""
    meta = raw.get("metadata") or {}
    return (
        digest(meta.get("labels")),
        digest(meta.get("annotations")),
        meta.get("deletionTimestamp"),
        digest(raw.get("spec")),
    )


class Cache:
    def __init__(
        self,
        scheduler_names: Iterable[str],
        *,
        kinds: Iterable[Kind] | None = None,
        on_news: Callable[[], None] = lambda: None,
        on_malformed: Callable[[Kind, Raw, str], None] = lambda kind, raw, message: None,
        on_bare_pod: Callable[[Pod], None] = lambda pod: None,
        on_bound_pod: Callable[[Pod], None] = lambda pod: None,
    ) -> None:
        self.state = ClusterState()
        self.kinds = {k.name: k for k in (kinds if kinds is not None else KINDS.values())}
        self._names = frozenset(scheduler_names)
        self._on_news = on_news
        self._on_malformed = on_malformed
        self.on_bare_pod = on_bare_pod
        """Called with each pending pod of ours that changed (its group may need the API)."""
        self.on_bound_pod = on_bound_pod
        """Told of every change to a bound, running-or-pending pod of ours."""
        self._prints: dict[str, dict[str, tuple[Any, ...] | None]] = {k: {} for k in self.kinds}
        self._json: dict[str, dict[str, bytes]] = {k.table: {} for k in self.kinds.values()}
        """Stored objects as JSON, for the session process (see :meth:`take_changes` and
        :attr:`keep_json`)."""
        self.keep_json: Literal["all", "sent", "none"] = "all"
        """Which objects are kept as JSON: ``all`` (a spawned session process is sent the whole
        state), ``sent`` (a forked one starts with the state in memory: only what changes after
        the listing, until it is taken), ``none`` (sessions in a thread read the state).
        Encoding every pod of a 50,000-pod listing cost 0.8 s of a restart, and its bytes
        stayed in memory for nothing."""
        self._malformed: dict[str, str] = {}
        self._dirty: dict[str, set[str]] = {}
        self._bound: dict[str, str] = {}
        """Pods whose only change since they were last taken is their bind (pod → node)."""
        self._annotated: dict[str, dict[str, str]] = {}
        """Pods whose other change since they were last taken is only their annotations (pod →
        annotations): a card assignment patched on, for one."""
        self._whole: set[str] = set()
        """Pods with a change since they were last taken that goes as the whole pod."""
        self._unsynced = set(self.kinds)
        self.synced = asyncio.Event()
        """Set once every kind has been listed: the first session may run."""
        self.parsed = 0
        """How many objects were validated (the rest of the events changed nothing read)."""

    # -- what the informers call -------------------------------------------------------------

    def replace(self, kind: Kind, items: Iterable[Raw]) -> None:
        """A full listing: what it has is stored, what it lacks is gone."""
        listed: set[str] = set()
        for raw in items:
            listed.add(self._key(kind, raw))
            self.apply(kind, "ADDED", raw)
        for key in list(self._prints[kind.name].keys() - listed):
            self._drop(kind, key)
        self.mark_synced(kind)

    def mark_synced(self, kind: Kind) -> None:
        self._unsynced.discard(kind.name)
        if not self._unsynced and not self.synced.is_set():
            self.synced.set()
            self._on_news()

    def apply(self, kind: Kind, event: str, raw: Raw) -> None:
        key = self._key(kind, raw)
        if event == "DELETED":
            self._drop(kind, key)
            return
        prints = self._prints[kind.name]
        mark = fingerprint(kind, raw)
        if mark is not None and key in prints and prints[key] == mark:
            return  # nothing the scheduler reads changed
        table: dict[str, Any] = getattr(self.state, kind.table)
        old = table.get(key)
        pod_kind = kind.name == "Pod"
        node = _bound_only(prints.get(key), mark) if pod_kind else None
        notes = _annotated_only(prints.get(key), mark, raw) if pod_kind and node is None else None
        if node is not None and old is not None:
            # a pod's bind coming back, nothing else changed: the pod we have, on its node (a
            # copy instead of a validation; the session process gets just the node, too)
            obj: Any = old.model_copy(
                update={"spec": old.spec.model_copy(update={"node_name": node})}
            )
            if key not in self._whole:
                self._bound[key] = node
        elif notes is not None and old is not None:
            # only annotations changed (a card assignment patched on): the same, for them
            obj = old.model_copy(
                update={"metadata": old.metadata.model_copy(update={"annotations": notes})}
            )
            if key not in self._whole:
                self._annotated[key] = notes
        else:
            self.parsed += 1
            parsed = parse_object(kind.name, raw)
            if isinstance(parsed, ObjectError):
                self._malformed_object(kind, key, raw, parsed)
                return
            obj = parsed
        if self._malformed.pop(f"{kind.name}/{key}", None) is not None:
            log.info("%s %s is valid again", kind.name, key, extra=self._about(kind, raw))
            self._set_invalid(f"{kind.name}/{key}", None)
        previous = prints.get(key)
        prints[key] = mark if mark is not None else _wakes(raw)
        table[key] = obj
        keep = self.keep_json
        if keep == "all" or (keep == "sent" and self.synced.is_set()):
            self._json[kind.table][key] = _encode(kind, raw)
        self._dirty.setdefault(kind.table, set()).add(key)
        if pod_kind and node is None and notes is None:
            self._whole.add(key)
            self._bound.pop(key, None)
            self._annotated.pop(key, None)
        if kind.name == "Pod":
            ours = (
                notes is not None and old is not None and _only(old, notes, ASSIGNMENT_ANNOTATIONS)
            )
            self._pod_news(raw, obj, old, previous, prints[key], quiet=ours)
        elif not kind.selector_only and (previous is None or previous != prints[key]):
            self._on_news()

    def _pod_news(
        self,
        raw: Raw,
        pod: Pod,
        old: Pod | None,
        previous: tuple[Any, ...] | None,
        mark: tuple[Any, ...] | None,
        *,
        quiet: bool = False,
    ) -> None:
        spec = raw.get("spec") or {}
        meta = raw.get("metadata") or {}
        phase = (raw.get("status") or {}).get("phase")
        done = phase in FINISHED_PHASES or bool(meta.get("deletionTimestamp"))
        if not spec.get("nodeName"):
            if spec.get("schedulerName") in self._names and not done:
                # new or changed pending work; the PodScheduled condition alone is our own
                # verdict coming back, not news
                if not quiet and (
                    previous is None or _without_verdict(previous) != _without_verdict(mark)
                ):
                    self._on_news()
                self.on_bare_pod(pod)
        elif done and (old is None or not _done(old)):
            self._on_news()  # capacity freed
        elif not done and spec.get("schedulerName") in self._names:
            self.on_bound_pod(pod)

    def _forget(self, kind: Kind, key: str) -> Any:
        """Take ``key`` out of everything kept about it; returns the object it held, if any."""
        self._prints[kind.name].pop(key, None)
        self._json[kind.table].pop(key, None)
        self._bound.pop(key, None)
        self._annotated.pop(key, None)
        table: dict[str, Any] = getattr(self.state, kind.table)
        old = table.pop(key, None)
        if old is not None:
            self._dirty.setdefault(kind.table, set()).add(key)
        return old

    def _drop(self, kind: Kind, key: str) -> None:
        if self._malformed.pop(f"{kind.name}/{key}", None) is not None:
            self._set_invalid(f"{kind.name}/{key}", None)
        old = self._forget(kind, key)
        if (
            old is not None
            and not kind.selector_only
            and (kind.name != "Pod" or old.spec.node_name)
        ):
            self._on_news()  # capacity or a constraint went away

    def _malformed_object(self, kind: Kind, key: str, raw: Raw, error: ObjectError) -> None:
        text = str(error)
        if self._malformed.get(f"{kind.name}/{key}") != text:
            self._malformed[f"{kind.name}/{key}"] = text
            log.warning("skipping malformed object: %s", text, extra=self._about(kind, raw))
            self._on_malformed(kind, raw, error.message)
            self._set_invalid(f"{kind.name}/{key}", error.message)
        # what was stored before is no longer the object: leave it out until it is valid again
        if self._forget(kind, key) is not None:
            self._on_news()

    @staticmethod
    def _key(kind: Kind, raw: Raw) -> str:
        meta = raw.get("metadata") or {}
        return kind.key(meta.get("namespace"), str(meta.get("name", "")))

    @staticmethod
    def _about(kind: Kind, raw: Raw) -> dict[str, object]:
        meta = raw.get("metadata") or {}
        return about(kind.name, str(meta.get("name", "")), meta.get("namespace"))

    # -- what the rest of the operator calls ---------------------------------------------------

    def set_owner_min_member(self, uid: str, value: int) -> None:
        if self.state.owner_min_members.get(uid) != value:
            self.state.owner_min_members[uid] = value
            self._dirty.setdefault("owner_min_members", set()).add(uid)
            self._on_news()

    def _set_invalid(self, key: str, message: str | None) -> None:
        """Record (or, with None, clear) that the object ``<Kind>/<key>`` failed validation."""
        if message is None:
            self.state.invalid.pop(key, None)
        else:
            self.state.invalid[key] = message
        self._dirty.setdefault("invalid", set()).add(key)

    def take_changes(self) -> Changes:
        """What was stored and dropped since the last call, for the session process: the API
        kinds' objects as the JSON they came in (see :class:`Changes`), binds as just the node."""
        tables: dict[str, tuple[dict[str, Any], list[str]]] = {}
        bound, annotated = self._bound, self._annotated
        for table, keys in self._dirty.items():
            held: dict[str, Any] = getattr(self.state, table)
            json = self._json.get(table)
            store: dict[str, Any] = held if json is None else json
            sent = keys - bound.keys() - annotated.keys() if table == "pods" else keys
            stored = {k: store[k] for k in sent if k in held}
            tables[table] = (stored, [k for k in sent if k not in held])
            if json is not None and self.keep_json == "sent":
                for key in keys:
                    json.pop(key, None)  # taken: the session process has it now
        self.forget_changes()
        return Changes(tables, bound=bound, annotated=annotated)

    def changed_pods(self) -> set[str]:
        """The pods changed since changes were last taken or forgotten (their keys only)."""
        return {*self._dirty.get("pods", ()), *self._bound, *self._annotated}

    def forget_changes(self) -> None:
        """Start recording changes afresh (whoever reads the state has all of it)."""
        self._dirty = {}
        self._bound = {}
        self._annotated = {}
        self._whole = set()

    def everything(self) -> Changes:
        """The whole state, for a new session process."""
        tables: dict[str, tuple[dict[str, Any], list[str]]] = {
            table: (dict(stored), []) for table, stored in self._json.items()
        }
        tables["owner_min_members"] = (dict(self.state.owner_min_members), [])
        tables["invalid"] = (dict(self.state.invalid), [])
        self.forget_changes()
        return Changes(tables, full=True)


def _encode(kind: Kind, raw: Raw) -> bytes:
    meta = raw.get("metadata") or {}
    if kind.namespaced and not meta.get("namespace"):
        raw = {**raw, "metadata": {**meta, "namespace": "default"}}
    return orjson.dumps(raw)


_ANNOTATIONS, _NODE, _VERDICT = 2, 5, 8
"""Where the annotations, the node name and the PodScheduled condition stand in a pod's
fingerprint."""


def _annotated_only(
    previous: tuple[Any, ...] | None, mark: tuple[Any, ...] | None, raw: Raw
) -> dict[str, str] | None:
    """The new annotations (read from ``raw``), when they are all that changed from
    ``previous`` to ``mark``."""
    if previous is None or mark is None or previous[_ANNOTATIONS] == mark[_ANNOTATIONS]:
        return None
    if any(previous[i] != mark[i] for i in range(len(mark)) if i != _ANNOTATIONS):
        return None
    notes = (raw.get("metadata") or {}).get("annotations") or {}
    if not isinstance(notes, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in notes.items()
    ):
        return None  # let validation say what is wrong
    return dict(notes)


def _bound_only(previous: tuple[Any, ...] | None, mark: tuple[Any, ...] | None) -> str | None:
    """The node, when the only change from ``previous`` to ``mark`` is the pod's bind: a node
    name set where there was none (and the PodScheduled condition the binding sets)."""
    if previous is None or mark is None:
        return None
    node = mark[_NODE]
    if not node or previous[_NODE]:
        return None
    rest_same = all(previous[i] == mark[i] for i in range(len(mark)) if i not in (_NODE, _VERDICT))
    return str(node) if rest_same else None


def _without_verdict(mark: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    return None if mark is None else mark[:_VERDICT] + mark[_VERDICT + 1 :]


def _only(old: Pod, notes: dict[str, str], keys: frozenset[str]) -> bool:
    """Whether the annotations changed from ``old``'s to ``notes`` in ``keys`` alone."""
    before = old.metadata.annotations
    changed = {k for k in before.keys() | notes.keys() if before.get(k) != notes.get(k)}
    return bool(changed) and changed <= keys


def _done(pod: Pod) -> bool:
    return pod.status.phase in FINISHED_PHASES or pod.metadata.deletion_timestamp is not None
