"""Maps an apiserver URL and HTTP method to what is being asked: a discovery document, or a
Kubernetes verb on a resource type, namespace, name and subresource.

Kept apart from the HTTP plumbing so the same parsing decides both how a request is served and
how it is recorded and matched by fault rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from emulator.discovery import VERSION_INFO, ResourceRegistry, ResourceType
from emulator.errors import ApiError

JsonDict = dict[str, Any]
_HEALTH = ("/healthz", "/livez", "/readyz")


@dataclass(frozen=True)
class Route:
    """A parsed request path. Either ``document`` (discovery) or ``rt`` is set."""

    document: Callable[[], JsonDict | str] | None = None
    rt: ResourceType | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    legacy_watch: bool = False  # /api/v1/watch/... paths


def _not_found() -> ApiError:
    return ApiError(404, "the server could not find the requested resource")


def parse(
    registry: ResourceRegistry, path: str, documents: Mapping[str, Any] | None = None
) -> Route:
    """Parse ``path``; unknown paths, types and subresources are 404 like on a real server.
    ``documents`` are fixed answers at paths no resource type serves (an aggregated API's, such
    as the custom metrics API)."""
    path = "/" + path.strip("/")
    if documents and path in documents:
        answer = documents[path]
        return Route(document=lambda: answer)
    if path == "/":
        return Route(document=lambda: {"paths": _paths(registry)})
    if path == "/version":
        return Route(document=lambda: dict(VERSION_INFO))
    if path in _HEALTH or path.startswith(tuple(f"{h}/" for h in _HEALTH)):
        return Route(document=lambda: "ok")
    if path == "/api":
        return Route(document=registry.api_versions)
    if path == "/apis":
        return Route(document=registry.api_group_list)

    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) >= 2:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis" and len(parts) == 2:
        group = parts[1]
        return Route(document=lambda: registry.api_group(group))
    elif parts[0] == "apis" and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise _not_found()
    if not rest:
        return Route(document=lambda: registry.api_resource_list(group, version))

    legacy_watch = rest[0] == "watch"
    if legacy_watch:
        rest = rest[1:]
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        candidate = registry.find(group, version, rest[2])
        if candidate is not None and candidate.namespaced:
            namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise _not_found()
    rt = registry.find(group, version, rest[0])
    if rt is None or (namespace is not None and not rt.namespaced):
        raise _not_found()
    name = rest[1] if len(rest) >= 2 else None
    subresource = rest[2] if len(rest) == 3 else None
    if subresource is not None and subresource not in rt.subresources:
        raise _not_found()
    return Route(
        rt=rt, namespace=namespace, name=name, subresource=subresource, legacy_watch=legacy_watch
    )


def _paths(registry: ResourceRegistry) -> list[str]:
    paths = {"/api", "/api/v1", "/apis", "/version", *_HEALTH}
    for rt in registry:
        if rt.group:
            paths.update({f"/apis/{rt.group}", f"/apis/{rt.group}/{rt.version}"})
    return sorted(paths)


def verb_of(method: str, route: Route, query: Any) -> str:
    """The Kubernetes verb (as RBAC names it) for a request; ``discovery`` for documents."""
    if route.document is not None:
        return "discovery"
    watch = route.legacy_watch or str(query.get("watch", "")).lower() in ("true", "1")
    match method.upper():
        case "GET" if watch:
            return "watch"
        case "GET":
            return "get" if route.name else "list"
        case "POST":
            return "create"
        case "PUT":
            return "update"
        case "PATCH":
            return "patch"
        case "DELETE":
            return "delete" if route.name else "deletecollection"
    raise ApiError(
        405, f"the server does not allow this method on the requested resource: {method}"
    )


def check_allowed(route: Route, verb: str) -> None:
    """405 for a verb the resource (or subresource) does not serve."""
    if route.rt is None:
        if verb != "discovery":
            raise ApiError(405, "the server does not allow this method on the requested resource")
        return
    if route.subresource is not None:
        allowed = route.rt.subresources[route.subresource]
    else:
        allowed = route.rt.verbs
        if route.name and verb == "create":
            allowed = ()  # POST to a named object is not a thing
        if (
            route.rt.namespaced
            and route.namespace is None
            and verb in ("create", "deletecollection")
        ):
            allowed = ()  # writes to namespaced collections need a namespace in the URL
    if verb not in allowed:
        raise ApiError(405, "the server does not allow this method on the requested resource")
