"""Volcano's network topology kind: HyperNode (``topology.volcano.sh/v1alpha1``).

A HyperNode is one network domain (a leaf switch, a spine, a NVLink island): a tier (lower is
better locality) and members that are nodes or other HyperNodes. Field names and validation follow
Volcano's CRD (shared/reference/volcano.md §1.4), so topologies written for Volcano load unchanged.
What the CRD cannot check (a member kind we do not know, a regex that does not compile, a
labelMatch with an unknown operator, a node in two HyperNodes of one tier, a cycle) is left to the
tree builder, which reports it on the HyperNode and ignores what is at fault instead of refusing
the object.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from caldera.models.base import ApiModel, ObjectMeta
from caldera.models.record import RecordError, error_text
from caldera.models.selectors import LabelSelector

__all__ = ["HyperNode", "HyperNodeMember", "MemberSelector"]


class ExactMatch(ApiModel):
    name: str = Field(min_length=1, max_length=253)


class RegexMatch(ApiModel):
    pattern: str = Field(min_length=1)


class MemberSelector(ApiModel):
    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: LabelSelector | None = None
    unusable_label_match: str = Field(default="", exclude=True)
    """Not an API field: why ``labelMatch`` selects nothing. The CRD checks neither its operators
    nor their values, so such a HyperNode is admitted; the tree builder reports the member and
    ignores it."""

    @model_validator(mode="before")
    @classmethod
    def _keep_unusable_label_match(cls, data: Any) -> Any:
        raw = data.get("labelMatch") if isinstance(data, dict) else None
        if raw is None:
            return data
        try:
            LabelSelector.model_validate(raw)
        except RecordError as exc:
            data = {k: v for k, v in data.items() if k != "labelMatch"}
            data["unusable_label_match"] = f"labelMatch.{error_text(exc, LabelSelector)}"
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> MemberSelector:
        label = self.label_match or self.unusable_label_match or None
        given = [s for s in (self.exact_match, self.regex_match, label) if s is not None]
        if len(given) != 1:
            raise ValueError("must have exactly one of exactMatch, regexMatch or labelMatch")
        return self


class HyperNodeMember(ApiModel):
    type: str = Field(min_length=1)
    """``Node`` or ``HyperNode``; anything else is reported by the tree builder and ignored."""
    selector: MemberSelector | None = None
    """The CRD does not require one; a member without it selects nothing (the tree builder
    says so)."""


class HyperNodeSpec(ApiModel):
    # The CRD requires ``tier`` only inside a spec, and neither the spec nor its members: an
    # object without them is an empty HyperNode, as Volcano's Go zero values make it.
    tier: int = Field(default=0, ge=0)
    tier_name: str = Field(default="", max_length=253)
    members: tuple[HyperNodeMember, ...] = Field(default=(), min_length=1)


class HyperNodeStatus(ApiModel):
    node_count: int | None = Field(default=None, ge=0)


class HyperNode(ApiModel):
    metadata: ObjectMeta
    spec: HyperNodeSpec = Field(default_factory=HyperNodeSpec)
    status: HyperNodeStatus = Field(default_factory=HyperNodeStatus)
