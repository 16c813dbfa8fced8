"""The emulator's state: objects, the global resourceVersion counter and the watch-event history.

Everything that changes an object goes through :class:`Store`, whether it arrives over HTTP or
from a test's direct helper, so both paths share one set of semantics: a single monotonically
increasing ``resourceVersion`` (as etcd's revision), 409 on a stale ``resourceVersion``,
status-subresource isolation, no-op writes that do not bump the version, finalizers that hold an
object until they are removed, and a bounded history that watches resume from (410 once it has
been compacted past the requested version).

All methods are synchronous: the emulator runs on the test's event loop, and a write plus the
delivery of its watch event to every subscriber happens without an ``await`` in between, so
watchers never miss or reorder an event.
"""

from __future__ import annotations

import bisect
import copy
import secrets
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from emulator import admission, patching
from emulator.discovery import ResourceRegistry, ResourceType
from emulator.errors import (
    ApiError,
    already_exists,
    bad_request,
    conflict,
    gone,
    invalid,
    not_found,
)
from emulator.selectors import Selector

JsonDict = dict[str, Any]
JsonList = list[JsonDict]
_SERVER_METADATA = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)
_INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_SYSTEM_PRIORITY_CLASSES = (
    ("system-cluster-critical", 2000000000),
    ("system-node-critical", 2000001000),
)


@dataclass(frozen=True)
class WatchEvent:
    """One committed change. ``obj`` and ``old`` are snapshots that nobody mutates."""

    rv: int
    type: str  # ADDED, MODIFIED or DELETED
    rt: ResourceType
    obj: JsonDict
    old: JsonDict | None = None


class Subscriber(Protocol):
    def deliver(self, event: WatchEvent) -> None: ...


def resource_key(rt: ResourceType) -> str:
    return f"{rt.group}/{rt.version}/{rt.plural}"


Keys = list[tuple[str, str]]
"""Objects' keys, (namespace, name), in order."""


class Store:
    """In-memory objects of every served type, with apiserver write semantics."""

    def __init__(self, registry: ResourceRegistry, *, history_limit: int = 10_000) -> None:
        self.registry = registry
        self._objects: dict[str, dict[tuple[str, str], JsonDict]] = {}
        self._sorted: dict[str, tuple[int, Keys]] = {}
        self._rv = 0
        self._history: deque[WatchEvent] = deque()
        self._history_limit = history_limit
        self._compacted_rv = 0  # a watch may resume from any RV >= this one
        self._subscribers: set[Subscriber] = set()
        for ns in _INITIAL_NAMESPACES:
            self.create(self.registry.resolve("namespaces"), {"metadata": {"name": ns}})
        pcs = self.registry.resolve("priorityclasses")
        for name, value in _SYSTEM_PRIORITY_CLASSES:
            self.create(pcs, {"metadata": {"name": name}, "value": value})

    # -- bookkeeping -----------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The latest committed resourceVersion (etcd revision)."""
        return self._rv

    @property
    def compacted_rv(self) -> int:
        return self._compacted_rv

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.add(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.discard(subscriber)

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], JsonDict]:
        return self._objects.setdefault(resource_key(rt), {})

    def _publish(
        self, event_type: str, rt: ResourceType, obj: JsonDict, old: JsonDict | None
    ) -> None:
        event = WatchEvent(self._rv, event_type, rt, obj, old)
        self._history.append(event)
        while len(self._history) > self._history_limit:
            self._compacted_rv = self._history.popleft().rv
        for subscriber in list(self._subscribers):
            subscriber.deliver(event)

    def compact(self) -> int:
        """Forget the whole history: resuming a watch from any RV issued so far gets 410 Gone.

        The RV is bumped once so that a fresh list (which reports the new RV) can still be
        watched from, exactly as after an etcd compaction followed by a relist.
        """
        self._rv += 1
        self._compacted_rv = self._rv
        self._history.clear()
        return self._rv

    def events_since(self, rv: int) -> list[WatchEvent]:
        """Every committed event after ``rv``; 410 if part of that span was compacted away."""
        if rv < self._compacted_rv:
            raise gone(f"too old resource version: {rv} ({self._compacted_rv})")
        return [event for event in self._history if event.rv > rv]

    def _lookup(self, resource: str, namespace: str | None, name: str) -> JsonDict | None:
        rt = self.registry.resolve(resource)
        return self._bucket(rt).get((namespace or "", name))

    # -- reads -----------------------------------------------------------------------------------

    def find(self, rt: ResourceType, namespace: str | None, name: str) -> JsonDict | None:
        obj = self._bucket(rt).get((self._ns(rt, namespace), name))
        return copy.deepcopy(obj) if obj is not None else None

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> JsonDict:
        obj = self.find(rt, namespace, name)
        if obj is None:
            raise not_found(rt.plural, name, rt.group)
        return obj

    def list(
        self,
        rt: ResourceType,
        selector: Selector | None = None,
        *,
        after: tuple[str, str] | None = None,
        limit: int = 0,
    ) -> tuple[JsonList, int]:
        """Copies of the objects ``selector`` matches, in key order, from past ``after`` on, at
        most ``limit`` (0: all); and how many more match past them. Only what is returned is
        copied: a page of a large listing costs its page, as etcd's range read does."""
        selector = selector or Selector()
        bucket = self._bucket(rt)
        keys = self._sorted_keys(rt)
        start = 0 if after is None else bisect.bisect_right(keys, after)
        out: JsonList = []
        for i in range(start, len(keys)):
            obj = bucket[keys[i]]
            if not selector.matches(obj):
                continue
            if limit and len(out) == limit:
                # kube-apiserver counts what is left only when nothing is selected (a
                # namespace's listing counts the namespaces after it too: a rough count)
                return out, len(keys) - i if selector.is_empty else 1
            out.append(copy.deepcopy(obj))
        return out, 0

    def _sorted_keys(self, rt: ResourceType) -> Keys:
        """The keys of ``rt``'s objects in order, sorted again only after a write."""
        name = resource_key(rt)
        held = self._sorted.get(name)
        if held is None or held[0] != self._rv:
            held = self._sorted[name] = (self._rv, sorted(self._bucket(rt)))
        return held[1]

    # -- writes ----------------------------------------------------------------------------------

    @staticmethod
    def _ns(rt: ResourceType, namespace: str | None) -> str:
        return (namespace or "") if rt.namespaced else ""

    def _check_type(self, rt: ResourceType, obj: JsonDict, *, strict: bool) -> None:
        for field, expected in (("apiVersion", rt.api_version), ("kind", rt.kind)):
            value = obj.get(field)
            if value is None:
                if strict and rt.custom:
                    label = "Kind" if field == "kind" else field
                    raise bad_request(f"Object '{label}' is missing in the request body")
                obj[field] = expected
            elif value != expected:
                raise bad_request(
                    f"the {field} in the data ({value}) does not match the expected {field} "
                    f"({expected})"
                )

    def create(
        self,
        rt: ResourceType,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        keep_status: bool = False,
        strict: bool = False,
        dry_run: bool = False,
    ) -> JsonDict:
        """POST a new object. ``strict`` applies HTTP-only checks (kind/apiVersion present)."""
        if not isinstance(body, Mapping):
            raise bad_request("the body of the request must be a JSON object")
        obj = copy.deepcopy(dict(body))
        self._check_type(rt, obj, strict=strict)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if meta.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise invalid(
                    rt.kind, "", "metadata.name: Required value: name or generateName is required"
                )
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        name = meta["name"]
        admission.validate_name(rt, name)

        if rt.namespaced:
            body_ns = meta.get("namespace")
            if namespace and body_ns and body_ns != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            ns = namespace or body_ns or "default"
            admission.require_namespace(self._lookup, ns)
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
            ns = ""
        if (ns, name) in self._bucket(rt):
            raise already_exists(rt.plural, name, rt.group)

        if rt.custom and rt.has_status and not keep_status:
            obj.pop("status", None)  # the status subresource ignores status on create
        admission.prepare_create(rt, obj, self._lookup, keep_status)
        for key in _SERVER_METADATA:
            meta.pop(key, None)
        meta.pop("managedFields", None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = admission.now()
        meta["generation"] = 1
        if dry_run:
            meta["resourceVersion"] = str(self._rv)
            return obj
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self._bucket(rt)[(ns, name)] = obj
        self._publish("ADDED", rt, obj, None)
        return copy.deepcopy(obj)

    def _existing(self, rt: ResourceType, namespace: str | None, name: str) -> JsonDict:
        obj = self._bucket(rt).get((self._ns(rt, namespace), name))
        if obj is None:
            raise not_found(rt.plural, name, rt.group)
        return obj

    def update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Mapping[str, Any],
        *,
        subresource: str | None = None,
        strict: bool = False,
        dry_run: bool = False,
    ) -> JsonDict:
        """PUT a whole object (``subresource='status'`` for the status endpoint)."""
        old = self._existing(rt, namespace, name)
        if not isinstance(body, Mapping):
            raise bad_request("the body of the request must be a JSON object")
        new = copy.deepcopy(dict(body))
        self._check_type(rt, new, strict=strict)
        meta = new.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({name})"
            )
        if (
            rt.namespaced
            and meta.get("namespace", old["metadata"]["namespace"]) != old["metadata"]["namespace"]
        ):
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        rv = meta.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(rt.plural, name, rt.group)
        if not rv and rt.custom:
            raise invalid(
                rt.kind,
                name,
                "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
            )
        if meta.get("uid") and meta["uid"] != old["metadata"]["uid"]:
            raise conflict(
                rt.plural,
                name,
                rt.group,
                why=f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: "
                f"{old['metadata']['uid']}",
            )
        return self._commit_update(rt, old, new, subresource, dry_run=dry_run)

    def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        patch: Any,
        content_type: str = patching.MERGE,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> JsonDict:
        """PATCH with a merge, strategic-merge or JSON patch."""
        old = self._existing(rt, namespace, name)
        media = content_type.split(";")[0].strip().lower()
        try:
            if media == patching.MERGE:
                if not isinstance(patch, Mapping):
                    raise bad_request("a merge patch must be a JSON object")
                new = patching.merge_patch(old, patch)
            elif media == patching.STRATEGIC and not rt.custom:
                if not isinstance(patch, Mapping):
                    raise bad_request("a strategic merge patch must be a JSON object")
                new = patching.strategic_merge_patch(old, patch, rt.merge_keys)
            elif media == patching.JSON_PATCH:
                new = patching.json_patch(old, patch)
            else:
                accepted = [patching.JSON_PATCH, patching.MERGE]
                if not rt.custom:
                    accepted.append(patching.STRATEGIC)
                raise ApiError(
                    415,
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {', '.join(accepted)}",
                )
        except patching.MalformedPatchError as exc:
            raise bad_request(str(exc)) from exc
        except patching.PatchError as exc:
            raise invalid(rt.kind, name, str(exc)) from exc
        if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
            raise invalid(rt.kind, name, "the patch removed the object's metadata")
        meta = new["metadata"]
        if (
            meta.get("resourceVersion", old["metadata"]["resourceVersion"])
            != old["metadata"]["resourceVersion"]
        ):
            raise conflict(rt.plural, name, rt.group)
        for key in ("name", "namespace", "uid"):
            if meta.get(key) != old["metadata"].get(key):
                raise invalid(rt.kind, name, f"metadata.{key}: Invalid value: field is immutable")
        new["apiVersion"], new["kind"] = rt.api_version, rt.kind
        return self._commit_update(rt, old, new, subresource, dry_run=dry_run)

    def _commit_update(
        self,
        rt: ResourceType,
        old: JsonDict,
        new: JsonDict,
        subresource: str | None,
        *,
        dry_run: bool,
    ) -> JsonDict:
        if subresource == "status":
            body = new
            new = copy.deepcopy(old)
            if "status" in body:
                new["status"] = body["status"]
            else:
                new.pop("status", None)
            if not rt.custom:  # built-in status strategies keep metadata changes (not ownerRefs)
                for key in ("labels", "annotations"):
                    if key in body["metadata"]:
                        new["metadata"][key] = body["metadata"][key]
                    else:
                        new["metadata"].pop(key, None)
        elif subresource is not None:
            raise ApiError(
                405, f"the server does not allow this method on {rt.plural}/{subresource}"
            )
        elif rt.has_status:  # the main endpoint ignores status when a status subresource exists
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)

        meta = new["metadata"]
        for key in _SERVER_METADATA:
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
            else:
                meta.pop(key, None)
        meta["name"] = old["metadata"]["name"]
        if rt.namespaced:
            meta["namespace"] = old["metadata"]["namespace"]
        meta.pop("managedFields", None)
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if old["metadata"].get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(old["metadata"].get("finalizers") or [])
            if added:
                raise invalid(
                    rt.kind,
                    meta["name"],
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the object "
                    "is being deleted",
                )
        admission.validate_update(rt, old, new)

        if new == old:
            return copy.deepcopy(old)  # a no-op write: no new resourceVersion, no watch event
        if _spec_of(rt, new) != _spec_of(rt, old):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        if dry_run:
            return new

        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        slot = (self._ns(rt, meta.get("namespace")), meta["name"])
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del self._bucket(rt)[slot]  # the last finalizer is gone: the deletion completes
            self._publish("DELETED", rt, new, old)
        else:
            self._bucket(rt)[slot] = new
            self._publish("MODIFIED", rt, new, old)
        return copy.deepcopy(new)

    def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        preconditions: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> JsonDict:
        """DELETE: immediate unless finalizers hold the object (then only deletionTimestamp)."""
        old = self._existing(rt, namespace, name)
        preconditions = preconditions or {}
        for key in ("uid", "resourceVersion"):
            wanted = preconditions.get(key)
            if wanted and wanted != old["metadata"].get(key):
                raise conflict(
                    rt.plural,
                    name,
                    rt.group,
                    why=f"Precondition failed: {key} in precondition: {wanted}, {key} in object "
                    f"meta: {old['metadata'].get(key)}",
                )
        if dry_run:
            return copy.deepcopy(old)
        if old["metadata"].get("finalizers"):
            if old["metadata"].get("deletionTimestamp"):
                return copy.deepcopy(old)
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = admission.now()
            new["metadata"]["deletionGracePeriodSeconds"] = grace_period_seconds or 0
            self._rv += 1
            new["metadata"]["resourceVersion"] = str(self._rv)
            self._bucket(rt)[(self._ns(rt, namespace), name)] = new
            self._publish("MODIFIED", rt, new, old)
            return copy.deepcopy(new)
        if rt.plural == "namespaces":  # the namespace controller empties it first (here: at once)
            for other in list(self.registry):
                if other.namespaced:
                    for obj in self.list(other, Selector(namespace=name))[0]:
                        self._remove(other, obj["metadata"]["namespace"], obj["metadata"]["name"])
        return self._remove(rt, namespace, name)

    def _remove(self, rt: ResourceType, namespace: str | None, name: str) -> JsonDict:
        key = (self._ns(rt, namespace), name)
        old = self._bucket(rt).pop(key)
        self._rv += 1
        gone_obj = copy.deepcopy(old)
        gone_obj["metadata"]["resourceVersion"] = str(self._rv)
        self._publish("DELETED", rt, gone_obj, old)
        return copy.deepcopy(gone_obj)

    def delete_collection(self, rt: ResourceType, selector: Selector) -> JsonList:
        return [
            self.delete(rt, obj["metadata"].get("namespace"), obj["metadata"]["name"])
            for obj in self.list(rt, selector)[0]
        ]

    def bind(
        self, namespace: str, name: str, binding: Mapping[str, Any], *, dry_run: bool = False
    ) -> JsonDict:
        """``pods/binding``: assign the pod to ``binding.target.name``; returns the bound pod."""
        pods = self.registry.resolve("pods")
        old = self._existing(pods, namespace, name)
        new = admission.bind(old, binding, name)
        if dry_run:
            return new
        self._rv += 1
        new["metadata"]["resourceVersion"] = str(self._rv)
        self._bucket(pods)[(namespace, name)] = new
        self._publish("MODIFIED", pods, new, old)
        return copy.deepcopy(new)


def _spec_of(rt: ResourceType, obj: Mapping[str, Any]) -> JsonDict:
    """The part of an object whose change bumps ``metadata.generation``."""
    skip = {"metadata", "status"} if rt.has_status else {"metadata"}
    return {k: v for k, v in obj.items() if k not in skip}
