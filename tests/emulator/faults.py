"""Fault injection and the request log, for tests that check how the operator copes with the API.

A :class:`FaultRule` matches requests by Kubernetes verb, resource, subresource, name and
namespace (``fnmatch`` patterns, ``"*"`` for any, ``""`` for "none", e.g. ``subresource=""``
matches only the main resource) and applies to the next ``times`` matching requests:

* ``fail`` — answer with an HTTP status and a proper ``Status`` body (optionally Retry-After),
  without touching the state;
* ``hang`` — hold the request for ``seconds`` (or until :meth:`FaultRule.release`), then drop the
  connection; with ``apply=True`` the request is applied first and only the response is held, the
  "timed out, but it happened" case that retries must survive (e.g. a second binding → 409);
* ``drop`` — reset the connection without a response, before (or, with ``apply=True``, after)
  applying the request.

Every request is recorded as a :class:`RequestRecord` so tests can assert on what the operator
actually sent: e.g. exactly one binding per pod, or no PATCH that touched kopf's annotations.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
from dataclasses import dataclass, field
from typing import Any, TypedDict

JsonDict = dict[str, Any]
VERBS = frozenset(
    {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "discovery"}
)


class FaultMatch(TypedDict, total=False):
    """Which requests a :class:`FaultRule` takes, as the emulator's ``fail_next``,
    ``hang_next`` and ``drop_next`` accept it: the next ``times`` (default 1; None: until
    removed) whose verb, resource, subresource, name and namespace match these patterns
    (default ``"*"``)."""

    times: int | None
    verb: str
    resource: str
    subresource: str
    name: str
    namespace: str


@dataclass
class RequestRecord:
    """One request as the emulator saw it. ``status`` is None if the connection was dropped."""

    verb: str
    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int | None = None
    resource: str = ""  # the plural ("pods"), "" for discovery and other non-resource paths
    group: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    content_type: str = ""
    fault: str = ""  # "fail", "hang" or "drop" when an injected fault hit this request
    note: str = ""  # watch outcome: "closed", "aborted", "timeout", "error 410"

    def touches(self, *paths: str) -> bool:
        """Whether the JSON body sets any of the dotted ``paths`` (JSON patches: by op path)."""
        if isinstance(self.body, list):
            op_paths = {str(op.get("path", "")) for op in self.body if isinstance(op, dict)}
            return any(
                op.strip("/").replace("/", ".").startswith(path)
                for op in op_paths
                for path in paths
            )
        for path in paths:
            current: Any = self.body
            for part in path.split("."):
                if not isinstance(current, dict) or part not in current:
                    break
                current = current[part]
            else:
                return True
        return False


@dataclass
class FaultRule:
    """One injected fault; see the module docstring for the actions."""

    action: str  # "fail", "hang" or "drop"
    times: int | None = 1  # None: until removed
    verb: str = "*"
    resource: str = "*"
    subresource: str = "*"
    name: str = "*"
    namespace: str = "*"
    status: int = 500
    reason: str | None = None
    message: str | None = None
    retry_after: int | None = None
    seconds: float | None = None
    apply: bool = False
    hits: int = 0
    _released: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def matches(self, record: RequestRecord) -> bool:
        qualified = f"{record.resource}.{record.group}" if record.group else record.resource
        return (
            fnmatch.fnmatchcase(record.verb, self.verb)
            and (
                fnmatch.fnmatchcase(record.resource, self.resource)
                or fnmatch.fnmatchcase(qualified, self.resource)
            )
            and fnmatch.fnmatchcase(record.subresource, self.subresource)
            and fnmatch.fnmatchcase(record.name, self.name)
            and fnmatch.fnmatchcase(record.namespace, self.namespace)
        )

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.hits >= self.times

    def release(self) -> None:
        """End the hang of every request held by this rule now."""
        self._released.set()

    async def hold(self) -> None:
        """Wait for ``seconds`` or for :meth:`release`, whichever comes first."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._released.wait(), timeout=self.seconds)


class FaultInjector:
    """The active fault rules, consulted by the server for each request in order."""

    def __init__(self) -> None:
        self.rules: list[FaultRule] = []

    def add(self, rule: FaultRule) -> FaultRule:
        if rule.action not in ("fail", "hang", "drop"):
            raise ValueError(f"unknown fault action {rule.action!r}")
        if rule.verb != "*" and not any(fnmatch.fnmatchcase(v, rule.verb) for v in VERBS):
            raise ValueError(f"verb {rule.verb!r} matches no Kubernetes verb ({sorted(VERBS)})")
        self.rules.append(rule)
        return rule

    def take(self, record: RequestRecord) -> FaultRule | None:
        """The first live rule matching ``record``, counting the hit."""
        for rule in self.rules:
            if not rule.exhausted and rule.matches(record):
                rule.hits += 1
                return rule
        return None

    def remove(self, rule: FaultRule) -> None:
        if rule in self.rules:
            self.rules.remove(rule)
        rule.release()

    def clear(self) -> None:
        for rule in list(self.rules):
            self.remove(rule)
