"""The scheduler's cache: the watched objects as validated models, kept current from watch events.

Each kind's informer hands its listing and then its events here, as the JSON they came in. A pod
or a node is decoded straight into its slim record (``models/record.py``), and what the
scheduler reads of it is compared with the record held (:func:`record_print`, references, no
copy): an event that changes none of it — most pod and node events are kubelet status updates and
heartbeats — is dropped, and the record held is the only copy of the object in this process.
Other kinds are compared by digests of their parts first (:func:`fingerprint`) and parsed only
when those changed. A malformed object is reported once (log line and callback) and left out.

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
from caldera.devices.vendors import ASSIGNMENT_ANNOTATIONS, NODE_ANNOTATIONS
from caldera.models.core import FINISHED_PHASES, Node, Pod
from caldera.models.kinds import KINDS, Kind
from caldera.models.parse import ObjectError, parse_object
from caldera.models.record import Record, RecordError
from caldera.operator.logs import about
from caldera.operator.watch.scopes import Scopes

__all__ = ["Cache", "fingerprint", "record_print"]

log = logging.getLogger(__name__)

Raw = Mapping[str, Any]
Json = bytes | memoryview
"""An object's JSON as it came (a slice of a list reply or a watch event)."""


def digest(value: Any) -> bytes | None:
    """A 16-byte stand-in for one part of an object (its JSON's BLAKE2b digest), so that the
    cache can tell whether the part changed without keeping it: a real pod's spec, with its env
    and volumes, is kilobytes as dicts."""
    if value is None:
        return None
    return hashlib.blake2b(orjson.dumps(value), digest_size=16).digest()


def fingerprint(kind: Kind, raw: Raw) -> tuple[Any, ...]:
    """What the scheduler reads of an object of a kind that is not a record, as digests: for a
    selector-only kind its selector, for the others anything but their status."""
    meta = raw.get("metadata") or {}
    if kind.selector_only:  # a ReplicaSet's status churn, a Service's ports: nothing read
        return (meta.get("uid"), digest((raw.get("spec") or {}).get("selector")))
    return _wakes(raw)


def record_print(obj: Any) -> tuple[Any, ...]:
    """What the scheduler reads of a pod or a node, as references into its record (no copy), or
    the whole of a smaller record but its resource version: an event whose record gives an
    equal print changes nothing read."""
    meta = obj.metadata
    if isinstance(obj, Pod):
        spec, status = obj.spec, obj.status
        verdict = status.condition("PodScheduled")
        return (
            meta.uid,
            meta.labels,
            meta.annotations,
            meta.deletion_timestamp,
            meta.owner_references,
            spec.node_name,
            spec,
            status.phase,
            None if verdict is None else (verdict.status, verdict.reason, verdict.message),
            status.resource_claim_statuses,
            status.start_time,
        )
    if not isinstance(obj, Node):  # a namespace, a priority class, a quota: all of it
        return (
            obj.model_copy(update={"metadata": meta.model_copy(update={"resource_version": ""})}),
        )
    notes = meta.annotations
    return (
        meta.uid,
        meta.labels,
        # only the device registrations: a node lock or a heartbeat changes nothing read
        {k: notes[k] for k in NODE_ANNOTATIONS if k in notes},
        obj.spec,
        obj.status.capacity,
        obj.status.allocatable,
        obj.ready,
        obj.status.images,
    )


def _wakes(raw: Raw) -> tuple[Any, ...]:
    """What must change in an object for a session to care: anything but its status (the
    scheduler writes PodGroup and Queue status itself)."""
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
        self._scopes = Scopes(self.kinds.values())
        self.synced = asyncio.Event()
        """Set once every kind has been listed: the first session may run."""
        self.parsed = 0
        """How many objects were stored as changed whole (parsed, for kinds that are not
        records): the other events changed nothing the scheduler reads, or only a pod's node or
        annotations (sent alone to a session process)."""

    # -- what the informers call -------------------------------------------------------------

    def replace(self, kind: Kind, items: Iterable[Raw | Json], selector: str = "") -> None:
        """A full listing (objects, or their JSON): what it has is stored, what it lacks is
        gone. ``selector``: the label selector it was made by (see :mod:`.scopes`)."""
        listed: set[str] = set()
        self.take_page(kind, items, listed, selector)
        self.end_listing(kind, listed, selector)

    def take_page(
        self, kind: Kind, items: Iterable[Raw | Json], listed: set[str], selector: str = ""
    ) -> list[str]:
        """Store one page of a listing, adding the keys it had to ``listed``; returns them."""
        keys = []
        for item in items:
            key = self.apply(kind, "ADDED", item, selector)
            if key is not None:
                keys.append(key)
        listed.update(keys)
        return keys

    def end_listing(self, kind: Kind, listed: set[str], selector: str = "") -> None:
        """A listing of ``kind`` is complete: what it did not have (``listed``) is gone (unless
        another label selector's listing holds it)."""
        table: dict[str, Any] = getattr(self.state, kind.table)
        for key in list(table.keys() - listed):
            if not self._scopes.kept(kind, key, selector, "DELETED"):
                self._drop(kind, key)
        self.mark_synced(kind, selector)

    def mark_synced(self, kind: Kind, selector: str = "") -> None:
        if self._scopes.listed(kind, selector) and not self.synced.is_set():
            self.synced.set()
            self._on_news()

    def apply(self, kind: Kind, event: str, item: Raw | Json, selector: str = "") -> str | None:
        """One event's object, as it came (JSON) or decoded, from the informer of ``selector``
        (see :mod:`.scopes`); returns its key (None when it has no name to be known by).

        A slim kind (a :class:`~caldera.models.record.Record`: pods, nodes) is decoded straight
        from its JSON into its record, and what the scheduler reads is compared with the record
        held; other kinds are compared by digests first and parsed only when they changed. An object
        that cannot be taken at all is logged and skipped: the informer goes on.
        """
        try:
            return self._apply(kind, event, item, selector)
        except Exception:
            log.exception("could not take a %s %s event; skipped", kind.name, event)
            return None

    def _apply(self, kind: Kind, event: str, item: Raw | Json, selector: str) -> str | None:
        if issubclass(kind.model, Record):
            return self._apply_record(kind.model, kind, event, item, selector)
        raw = item if isinstance(item, Mapping) else orjson.loads(item)
        key = self._key(kind, raw)
        if self._scopes.kept(kind, key, selector, event):
            return key
        if event == "DELETED":
            self._drop(kind, key)
            return key
        prints = self._prints[kind.name]
        mark = fingerprint(kind, raw)
        if kind.selector_only and prints.get(key) == mark:
            return key  # its selector, all that is read, is the same
        self.parsed += 1
        parsed = parse_object(kind.name, raw)
        if isinstance(parsed, ObjectError):
            self._malformed_object(kind, key, raw, parsed)
            return key
        previous = prints.get(key)
        prints[key] = mark
        self._store(kind, key, parsed, lambda: _encode(kind, raw))
        if not kind.selector_only and previous != mark:
            self._on_news()
        return key

    def _apply_record(
        self, model: type[Record], kind: Kind, event: str, item: Raw | Json, selector: str
    ) -> str | None:
        text = orjson.dumps(item) if isinstance(item, Mapping) else item
        try:
            obj: Any = model.model_validate_json(text)
        except RecordError:
            raw = item if isinstance(item, Mapping) else orjson.loads(text)
            if not isinstance(raw, Mapping):
                log.warning("skipping a %s that is not an object", kind.name)
                return None
            key = self._key(kind, raw)
            if event == "DELETED":
                self._drop(kind, key)
            else:
                parsed = parse_object(kind.name, raw)
                assert isinstance(parsed, ObjectError)  # the record's decoder refused it
                self._malformed_object(kind, key, raw, parsed)
            return key
        meta = obj.metadata
        if kind.namespaced and not meta.namespace:  # a manifest's: the API always sets one
            meta = meta.model_copy(update={"namespace": "default"})
            obj = obj.model_copy(update={"metadata": meta})
            text = _encode(kind, orjson.loads(text))
        key = kind.key(meta.namespace, meta.name)
        if self._scopes.kept(kind, key, selector, event):
            return key
        if event == "DELETED":
            self._drop(kind, key)
            return key
        table: dict[str, Any] = getattr(self.state, kind.table)
        old = table.get(key)
        previous = None if old is None else record_print(old)
        mark = record_print(obj)
        if previous == mark:
            return key  # nothing the scheduler reads changed
        if kind.name != "Pod":
            self.parsed += 1
            self._store(kind, key, obj, lambda: text)
            self._on_news()
            return key
        node = _bound_only(previous, mark)
        notes = _annotated_only(previous, mark) if node is None else None
        self._store(kind, key, obj, lambda: text)
        if node is None and notes is None:
            self.parsed += 1
            self._whole.add(key)
            self._bound.pop(key, None)
            self._annotated.pop(key, None)
        elif key not in self._whole:  # a session process is sent just the node, or the notes
            if node is not None:
                self._bound[key] = node
            elif notes is not None:
                self._annotated[key] = notes
        ours = notes is not None and old is not None and _only(old, notes, ASSIGNMENT_ANNOTATIONS)
        self._pod_news(obj, old, previous, mark, quiet=ours)
        return key

    def _store(self, kind: Kind, key: str, obj: Any, text: Callable[[], Json]) -> None:
        """Hold ``obj`` as the object at ``key`` (and its JSON, when a session process will be
        sent it)."""
        if self._malformed.pop(f"{kind.name}/{key}", None) is not None:
            log.info("%s %s is valid again", kind.name, key, extra=self._about_key(kind, key))
            self._set_invalid(f"{kind.name}/{key}", None)
        table: dict[str, Any] = getattr(self.state, kind.table)
        table[key] = obj
        keep = self.keep_json
        if keep == "all" or (keep == "sent" and self.synced.is_set()):
            self._json[kind.table][key] = bytes(text())
        self._dirty.setdefault(kind.table, set()).add(key)

    def _pod_news(
        self,
        pod: Pod,
        old: Pod | None,
        previous: tuple[Any, ...] | None,
        mark: tuple[Any, ...],
        *,
        quiet: bool = False,
    ) -> None:
        done = _done(pod)
        if not pod.spec.node_name:
            if pod.spec.scheduler_name in self._names and not done:
                # new or changed pending work; the PodScheduled condition alone is our own
                # verdict coming back, not news
                if not quiet and (
                    previous is None or _without_verdict(previous) != _without_verdict(mark)
                ):
                    self._on_news()
                self.on_bare_pod(pod)
        elif done and (old is None or not _done(old)):
            self._on_news()  # capacity freed
        elif not done and pod.spec.scheduler_name in self._names:
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

    @staticmethod
    def _about_key(kind: Kind, key: str) -> dict[str, object]:
        namespace, _, name = key.rpartition("/")
        return about(kind.name, name, namespace or None)

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
        """What was stored and dropped since the last call: for a session process, the API
        kinds' objects as the JSON they came in (see :class:`Changes`), binds as just the node;
        for a session thread (:attr:`keep_json` ``none``), the objects held."""
        tables: dict[str, tuple[dict[str, Any], list[str]]] = {}
        decoded = self.keep_json == "none"
        # to a thread, a pod whose bind or notes alone changed goes whole: it is shared, not sent
        bound, annotated = ({}, {}) if decoded else (self._bound, self._annotated)
        for table, keys in self._dirty.items():
            held: dict[str, Any] = getattr(self.state, table)
            json = None if decoded else self._json.get(table)
            store: dict[str, Any] = held if json is None else json
            sent = keys - bound.keys() - annotated.keys() if table == "pods" else keys
            stored = {k: store[k] for k in sent if k in held}
            tables[table] = (stored, [k for k in sent if k not in held])
            if json is not None and self.keep_json == "sent":
                for key in keys:
                    json.pop(key, None)  # taken: the session process has it now
        self.forget_changes()
        return Changes(tables, bound=bound, annotated=annotated, decoded=decoded)

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


_ANNOTATIONS, _NODE, _SPEC, _VERDICT = 2, 5, 6, 8
"""Where the annotations, the node name, the spec and the PodScheduled condition stand in a
pod's print."""


def _annotated_only(
    previous: tuple[Any, ...] | None, mark: tuple[Any, ...]
) -> dict[str, str] | None:
    """The new annotations, when they are all that changed from ``previous`` to ``mark``."""
    if previous is None or previous[_ANNOTATIONS] == mark[_ANNOTATIONS]:
        return None
    if any(previous[i] != mark[i] for i in range(len(mark)) if i != _ANNOTATIONS):
        return None
    notes: dict[str, str] = mark[_ANNOTATIONS]
    return notes


def _bound_only(previous: tuple[Any, ...] | None, mark: tuple[Any, ...]) -> str | None:
    """The node, when the only change from ``previous`` to ``mark`` is the pod's bind: a node
    name set where there was none (and the PodScheduled condition the binding sets)."""
    if previous is None:
        return None
    node = mark[_NODE]
    if not node or previous[_NODE]:
        return None
    skip = (_NODE, _SPEC, _VERDICT)
    if any(previous[i] != mark[i] for i in range(len(mark)) if i not in skip):
        return None
    bound = previous[_SPEC].model_copy(update={"node_name": node})
    return str(node) if bound == mark[_SPEC] else None


def _without_verdict(mark: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    return None if mark is None else mark[:_VERDICT] + mark[_VERDICT + 1 :]


def _only(old: Pod, notes: dict[str, str], keys: frozenset[str]) -> bool:
    """Whether the annotations changed from ``old``'s to ``notes`` in ``keys`` alone."""
    before = old.metadata.annotations
    changed = {k for k in before.keys() | notes.keys() if before.get(k) != notes.get(k)}
    return bool(changed) and changed <= keys


def _done(pod: Pod) -> bool:
    return pod.status.phase in FINISHED_PHASES or pod.metadata.deletion_timestamp is not None
