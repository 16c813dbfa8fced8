"""Label selectors (``metav1.LabelSelector``) and how they match, with apimachinery's rules.

Pod affinity, topology spread and namespace selectors all use this one type. Two edge cases
decide real placements and are kept exactly: a *missing* selector (``None``) matches nothing,
an *empty* one (``{}``) matches everything. ``In``/``NotIn`` need at least one value,
``Exists``/``DoesNotExist`` none; ``NotIn`` and ``DoesNotExist`` match objects without the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field, model_validator

from caldera.models.base import ApiModel

__all__ = ["LabelSelector", "LabelSelectorRequirement", "matches"]


class LabelSelectorRequirement(ApiModel):
    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _values_fit_operator(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"values: must be non-empty for operator {self.operator}")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"values: must be empty for operator {self.operator}")
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None


class LabelSelector(ApiModel):
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _labels_as_pairs(cls, data: object) -> object:
        # a frozen, hashable form of matchLabels, so equal selectors share cached results
        if isinstance(data, dict):
            labels = data.get("matchLabels", data.get("match_labels"))
            if isinstance(labels, dict):
                data = {k: v for k, v in data.items() if k not in ("matchLabels", "match_labels")}
                data["match_labels"] = tuple(sorted(labels.items()))
        return data

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.match_expressions
        )

    def with_requirements(self, extra: tuple[LabelSelectorRequirement, ...]) -> LabelSelector:
        """This selector narrowed by ``extra`` (how matchLabelKeys are applied)."""
        if not extra:
            return self
        return LabelSelector(
            match_labels=self.match_labels, match_expressions=self.match_expressions + extra
        )


def matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A missing selector matches nothing; an empty one matches everything."""
    return selector is not None and selector.matches(labels)
