"""Test configuration: tests import the product from the ``operator/`` source root.

Commands run in the test process set the garbage collector up for a process that ends with them
(``caldera simulate`` turns automatic collection off); each test gets the collector back as
Python starts it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

import pytest


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC for the test (tdm's windows are the scheduler's local time)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture(autouse=True)
def _collector_as_python_starts_it() -> Iterator[None]:
    yield
    if not gc.isenabled():
        gc.unfreeze()
        gc.enable()
