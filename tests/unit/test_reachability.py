"""An API outage is said in two lines, however many requests fail during it."""

from __future__ import annotations

import logging

import aiohttp
import pytest

from caldera.k8s.reachability import Reachability
from caldera.k8s.rest import ApiError


def test_an_outage_is_two_lines_and_the_failures_are_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    failures: list[int] = []
    states: list[bool] = []
    reach = Reachability(
        on_failure=lambda: failures.append(1), on_change=states.append, clock=lambda: now[0]
    )
    refused = aiohttp.ClientConnectionError("Cannot connect to host 127.0.0.1:6443")
    with caplog.at_level(logging.INFO, logger="caldera.k8s.reachability"):
        for _ in range(1000):
            reach.failure(refused)
            assert reach.counted(refused, "bind")  # the caller logs nothing of its own
        now[0] += 7.0
        reach.answered()
        reach.answered()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("the API server is unreachable")
    assert lines[1] == (
        "the API server is reachable again after 7.0s: 1000 requests failed meanwhile; "
        "retried 1000 binds"
    )
    assert len(failures) == 1000 and states == [False, True]


def test_an_answer_with_an_error_status_is_not_an_outage() -> None:
    reach = Reachability()
    error = ApiError(500, "etcdserver: request timed out")
    reach.failure(error)
    assert not reach.down
    assert not reach.counted(error)  # the caller reports it as before
