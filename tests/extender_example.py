"""The example extender (``examples/extender/server.py``) started on loopback for a test or a
benchmark: the same file users start from, over real HTTP."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from loopback import serving

__all__ = ["example", "running_extender"]

_PATH = Path(__file__).resolve().parents[1] / "examples" / "extender" / "server.py"


def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_extender", _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def running_extender(
    *, delay: float = 0.0, fail: frozenset[str] = frozenset()
) -> Iterator[tuple[str, Any]]:
    """(its URL prefix, its :class:`Extender`, which counts the calls) while it serves."""
    server, ext = example().make_server(0, delay=delay, fail=fail)
    with serving(server) as url:
        yield url, ext
