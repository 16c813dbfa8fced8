"""Go ``time.ParseDuration`` syntax (``300ms``, ``1h30m``, ``-1.5h``), used by Volcano arguments."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_METRICS_INTERVAL", "metrics_interval", "parse_go_duration"]

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration string; raises ValueError like Go does for bad input."""
    s = text.strip()
    sign = 1.0
    if s[:1] in "+-" and s:
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    pos, total = 0, 0.0
    while pos < len(s):
        match = _PART.match(s, pos)
        if match is None:
            raise ValueError(f"invalid duration {text!r}")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return sign * total


DEFAULT_METRICS_INTERVAL = 30.0
"""Volcano's ``defaultMetricsInterval``."""


def metrics_interval(metrics: Mapping[str, Any]) -> float:
    """Seconds between two refreshes of the policy's metrics source (``metrics.interval``): a Go
    duration; missing, unreadable or not above 0, Volcano's 30 s. The source refreshes at this
    pace and the ``usage`` plugin counts pods younger than it as not in the metrics yet."""
    text = metrics.get("interval")
    try:
        seconds = parse_go_duration(str(text)) if text else DEFAULT_METRICS_INTERVAL
    except ValueError:
        return DEFAULT_METRICS_INTERVAL
    return seconds if seconds > 0 else DEFAULT_METRICS_INTERVAL
