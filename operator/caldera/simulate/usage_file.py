"""``--node-usage FILE``: nodes' real load for ``simulate`` and ``explain``, so what-if runs of the
``usage`` plugin work offline.

The file maps node names to their CPU and memory use in percent (0–100), and optionally how
long before the run the values were measured (a Go duration; default 0)::

    n1: {cpu: 45, memory: 60}
    n2: {cpu: 92, memory: 30, age: 2m}
    n3: {cpu: 10, memory: 10, age: 6m}   # older than 5 minutes: not used, as in the operator

A node the file does not name has no metrics (it is neither filtered nor scored by load).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from caldera.api.usage import NodeUsage
from caldera.errors import yaml_problem
from caldera.framework.duration import parse_go_duration

__all__ = ["Reading", "at", "read_node_usage"]

Reading = tuple[float, float, float]
"""(cpu %, memory %, seconds before the run it was measured)."""


class UsageFileError(ValueError):
    """The file cannot be used; the message names the key at fault."""


def read_node_usage(path: str) -> dict[str, Reading]:
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageFileError(f"{path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UsageFileError(f"{path}: {yaml_problem(exc)}") from None
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise UsageFileError(f"{path}: expected a map of node name to its usage")
    return {str(name): _reading(path, str(name), value) for name, value in doc.items()}


def _reading(path: str, name: str, value: Any) -> Reading:
    if not isinstance(value, Mapping):
        raise UsageFileError(f"{path}: {name}: expected a map with cpu and memory")
    unknown = set(value) - {"cpu", "memory", "age"}
    if unknown:
        first = min(str(key) for key in unknown)
        raise UsageFileError(f"{path}: {name}.{first}: not a key (cpu, memory, age)")
    out: list[float] = []
    for key in ("cpu", "memory"):
        number = value.get(key)
        if (
            isinstance(number, bool)
            or not isinstance(number, int | float)
            or not 0 <= number <= 100
        ):
            raise UsageFileError(f"{path}: {name}.{key}: expected a percentage from 0 to 100")
        out.append(float(number))
    try:
        age = parse_go_duration(str(value.get("age", "0s")))
    except ValueError as exc:
        raise UsageFileError(f"{path}: {name}.age: {exc}") from None
    return out[0], out[1], age


def at(readings: Mapping[str, Reading], now: float) -> dict[str, NodeUsage]:
    """The readings as measured relative to ``now``."""
    return {name: NodeUsage(cpu, mem, now - age) for name, (cpu, mem, age) in readings.items()}
