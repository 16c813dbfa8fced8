"""Label key and value syntax, and Go's integer parsing, as kube-scheduler checks them.

The API server stores some selector requirements that kube-scheduler then refuses to parse:
apimachinery's ``labels.NewRequirement`` checks the key as a qualified name
(``validation.IsQualifiedName``), every value as a label value (``IsValidLabelValue``) and a
``Gt``/``Lt`` bound with ``strconv.ParseInt(v, 10, 64)``. A requirement failing those checks is
not a malformed object, so it loads; it only makes its selector term match nothing. These
predicates are the checks, written once for every place that needs them.
"""

from __future__ import annotations

import re

__all__ = ["is_label_value", "is_qualified_name", "parse_int64"]

_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*", re.ASCII)
_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_NAME_MAX = 63
_PREFIX_MAX = 253


def is_label_value(value: str) -> bool:
    """apimachinery's ``IsValidLabelValue``: empty, or at most 63 alphanumerics, ``-``, ``_`` and
    ``.`` that start and end with an alphanumeric."""
    return value == "" or (len(value) <= _NAME_MAX and _NAME.fullmatch(value) is not None)


def is_qualified_name(key: str) -> bool:
    """apimachinery's ``IsQualifiedName``: an optional DNS-subdomain prefix and ``/``, then a
    name as a label value has it, but not empty."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if "/" in prefix or not prefix or len(prefix) > _PREFIX_MAX:
            return False
        if _DNS_SUBDOMAIN.fullmatch(prefix) is None:
            return False
    return name != "" and is_label_value(name)


def parse_int64(value: object) -> int | None:
    """The value as Go's ``strconv.ParseInt(v, 10, 64)`` reads it, or None (no spaces, no ``_``
    separators, no other scripts' digits, within int64)."""
    if not isinstance(value, str) or _INT.fullmatch(value) is None:
        return None
    n = int(value)
    return n if -(2**63) <= n < 2**63 else None
