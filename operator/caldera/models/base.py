"""Shared pydantic configuration and field types for Kubernetes objects."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel

from caldera.quantity import QuantityError, to_engine_units

__all__ = [
    "ApiModel",
    "ObjectMeta",
    "OwnerReference",
    "ResourceList",
    "Timestamp",
    "format_timestamp",
]


class ApiModel(BaseModel):
    """Base for API objects: camelCase keys, unknown keys ignored (newer servers add fields)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


def _resource_list(value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("expected a map of resource name to quantity")  # noqa: TRY004
    out: dict[str, float] = {}
    for name, quantity in value.items():
        try:
            out[str(name)] = to_engine_units(str(name), quantity)
        except QuantityError as exc:
            raise ValueError(f"{name}: {exc}") from None
    return out


def _timestamp(value: Any) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        stamp = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    elif isinstance(value, str):
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"invalid RFC 3339 time {value!r}") from None
    else:
        raise ValueError(f"invalid time {value!r}")  # noqa: TRY004
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def format_timestamp(stamp: float | None) -> str | None:
    """Seconds since the epoch as the API writes times (RFC 3339, UTC, whole seconds)."""
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


ResourceList = Annotated[dict[str, float], BeforeValidator(_resource_list)]
"""A Kubernetes ResourceList converted to engine units (cpu millicores, other resources whole)."""

Timestamp = Annotated[float | None, BeforeValidator(_timestamp)]
"""An RFC 3339 time as seconds since the epoch; None when absent."""


class OwnerReference(ApiModel):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False


class ObjectMeta(ApiModel):
    name: str = Field(min_length=1)
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: Timestamp = None
    deletion_timestamp: Timestamp = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
