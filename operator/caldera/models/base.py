"""What every kind shares: the pydantic base for Volcano's kinds, field types, and object
metadata (a slim :class:`~caldera.models.record.Record`, held by both kinds of model)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import msgspec
from msgspec import Meta
from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic.alias_generators import to_camel

from caldera.models.record import Record, Time, quantities, settle_times, timestamp

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


def format_timestamp(stamp: float | None) -> str | None:
    """Seconds since the epoch as the API writes times (RFC 3339, UTC, whole seconds)."""
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


ResourceList = Annotated[dict[str, float], BeforeValidator(quantities)]
"""A Kubernetes ResourceList converted to engine units (cpu millicores, other resources whole)."""

Timestamp = Annotated[float | None, BeforeValidator(timestamp)]
"""An RFC 3339 time as seconds since the epoch; None when absent."""


class OwnerReference(Record, kw_only=True, frozen=True):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False


class ObjectMeta(Record, kw_only=True, frozen=True):
    name: Annotated[str, Meta(min_length=1)]
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: Time = None
    deletion_timestamp: Time = None
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    owner_references: list[OwnerReference] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        settle_times(self, "creation_timestamp", "deletion_timestamp")
