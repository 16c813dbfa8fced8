"""``/hypernodes/validate``: every member a Node or a HyperNode, picked by one valid selector.

Follows ``pkg/webhooks/admission/hypernodes/validate/admit_hypernode.go``
(``validateHyperNode``, ``validateHyperNodeMemberType``, ``validateHyperNodeMemberSelector``):
all members' errors are collected, at Volcano's index-free paths (``[].spec.members.type``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from caldera.admission.review import FieldErrors, Review, Unquoted
from caldera.models.names import is_qualified_name

__all__ = ["validate_hypernode"]

_PATH = "[].spec.members"
_MEMBER_TYPES = ("Node", "HyperNode")
_NAME_RULE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


def validate_hypernode(review: Review) -> None:
    if review.operation not in ("CREATE", "UPDATE"):
        return
    errors = FieldErrors()
    for member in review.spec.get("members") or ():
        if not isinstance(member, Mapping):
            errors.invalid(_PATH, json.dumps(member), "a member must be an object")
            continue
        kind = member.get("type", "")
        if kind not in _MEMBER_TYPES:
            errors.invalid(f"{_PATH}.type", kind, f"unknown member type {kind}")
        _selector(errors, member.get("selector"))
    errors.raise_any()


def _selector(errors: FieldErrors, selector: object) -> None:
    path = f"{_PATH}.selector"
    selector = selector if isinstance(selector, Mapping) else {}
    exact, regex = selector.get("exactMatch"), selector.get("regexMatch")
    shown = Unquoted(json.dumps(selector, separators=(",", ":"), sort_keys=True))
    if exact is None and regex is None:
        errors.invalid(path, shown, "member selector must have one of regexMatch or exactMatch")
        return
    if exact is not None and regex is not None:
        errors.invalid(path, shown, "member selector cannot have both regexMatch and exactMatch")
        return
    if isinstance(exact, Mapping):
        name = str(exact.get("name") or "")
        if not name:
            errors.invalid(f"{path}.exactMatch.name", name, "member exactMatch name is required")
        elif not is_qualified_name(name):
            errors.invalid(
                f"{path}.exactMatch.name", name, f"member exactMatch validate failed [{_NAME_RULE}]"
            )
    if isinstance(regex, Mapping):
        pattern = str(regex.get("pattern") or "")
        if not pattern:
            errors.invalid(
                f"{path}.regexMatch.pattern", pattern, "member regexMatch pattern is required"
            )
        else:
            try:
                re.compile(pattern)
            except re.error as exc:
                errors.invalid(
                    f"{path}.regexMatch.pattern",
                    pattern,
                    f"member regexMatch pattern is invalid: error parsing regexp: {exc}",
                )
