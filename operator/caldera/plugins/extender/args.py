"""The ``extender`` plugin's arguments, with Volcano's keys (``extender.urlPrefix``, the verbs,
``extender.httpTimeout``, ``extender.ignorable``, ``extender.managedResources``).

Volcano's ``parseExtenderConfig`` reads them leniently; what it passes over loads here too, with
a policy warning naming the key: a timeout it cannot parse keeps the 1 s default, and an empty
URL prefix makes every call fail (as Volcano's requests to ``/<verb>`` do).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from caldera.framework.duration import parse_go_duration
from caldera.framework.plugin import Args

__all__ = ["DEFAULT_TIMEOUT", "VERBS", "ExtenderArgs"]

DEFAULT_TIMEOUT = 1.0
"""Seconds a call may take (Volcano's default ``httpTimeout``)."""

_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def _verb(hook: str) -> Any:
    return Field("", alias=f"extender.{hook}Verb")


class ExtenderArgs(Args):
    url_prefix: str = Field("", alias="extender.urlPrefix")
    http_timeout: str = Field("", alias="extender.httpTimeout")
    ignorable: bool = Field(False, alias="extender.ignorable")
    managed_resources: frozenset[str] = Field(frozenset(), alias="extender.managedResources")
    on_session_open: str = _verb("onSessionOpen")
    on_session_close: str = _verb("onSessionClose")
    predicate: str = _verb("predicate")
    prioritize: str = _verb("prioritize")
    preemptable: str = _verb("preemptable")
    reclaimable: str = _verb("reclaimable")
    queue_overused: str = _verb("queueOverused")
    job_enqueueable: str = _verb("jobEnqueueable")
    job_ready: str = _verb("jobReady")
    allocate_func: str = _verb("allocateFunc")
    deallocate_func: str = _verb("deallocateFunc")

    @field_validator("ignorable", mode="before")
    @classmethod
    def _bool(cls, value: Any) -> bool:
        """A YAML boolean, or a string Go's ``strconv.ParseBool`` reads (``GetBool``)."""
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value in _TRUE + _FALSE:
            return value in _TRUE
        raise ValueError(f"expected true or false, not {value!r}")

    @field_validator("managed_resources", mode="before")
    @classmethod
    def _names(cls, value: Any) -> frozenset[str]:
        """A list of resource names, or one comma-separated string of them."""
        if isinstance(value, str):
            value = value.split(",")
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"expected a list of resource names, not {value!r}")
        return frozenset(v.strip() for v in value if v.strip())

    @property
    def timeout(self) -> float:
        """Seconds a call may take: ``httpTimeout`` when it parses to more than 0, else 1 s."""
        try:
            seconds = parse_go_duration(self.http_timeout) if self.http_timeout else 0.0
        except ValueError:
            return DEFAULT_TIMEOUT
        return seconds if seconds > 0 else DEFAULT_TIMEOUT

    def verb(self, hook: str) -> str:
        """The verb (URL path) serving ``hook`` (one of :data:`VERBS`); empty: not served."""
        value: str = getattr(self, _FIELDS[hook])
        return value

    def url(self, hook: str) -> str:
        return f"{self.url_prefix.rstrip('/')}/{self.verb(hook)}"

    def passed_over(self) -> list[tuple[str, str, str]]:
        found = []
        if not self.url_prefix:
            found.append(("['extender.urlPrefix']", "missing or empty", "every call fails"))
        if self.http_timeout:
            try:
                bad = parse_go_duration(self.http_timeout) <= 0
            except ValueError:
                bad = True
            if bad:
                found.append(
                    (
                        "['extender.httpTimeout']",
                        f"{self.http_timeout!r} is not a positive Go duration (e.g. 100ms)",
                        "calls time out after 1s",
                    )
                )
        return found


_FIELDS = {
    hook: name
    for name, info in ExtenderArgs.model_fields.items()
    if info.alias and info.alias.endswith("Verb")
    for hook in [info.alias.removeprefix("extender.").removesuffix("Verb")]
}
VERBS = tuple(_FIELDS)
"""The hooks an extender may serve (``onSessionOpen``, ``predicate``…), each switched on by its
``extender.<hook>Verb`` key."""
