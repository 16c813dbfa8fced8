"""What a session may ask of a system outside the cluster, and how a failed answer looks.

The engine does no I/O. A plugin that must ask another system during a session (the ``extender``
plugin's HTTP calls) goes through the :class:`Caller` the session is given: the operator's
session process and the command line give a real HTTP client (``caldera.outside.http``); a
session given none refuses every call, so a policy naming an extender still runs offline, as if
the extender were down.

Two exceptions cross the engine:

- :class:`CallError` is a call that did not get a usable answer (unreachable, timed out, not
  HTTP 200, too large, not JSON): the plugin decides what that means (``ignorable``).
- :class:`DecisionFailed` is raised by a scorer or a node check when a task cannot be decided this
  session (a non-ignorable extender that failed): placement reports its message as the reason
  and leaves the task pending, instead of choosing a node without the answer it needed.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["MAX_BODY", "NO_CALLER", "CallError", "Caller", "DecisionFailed", "Unreachable"]

MAX_BODY = 10 << 20
"""The largest answer read (10 MiB, Volcano's ``maxBodySize``); a larger one is a failed call."""


class CallError(Exception):
    """A call without a usable answer; the message says what happened, with the URL."""


class Unreachable(CallError):
    """No connection, or no answer in time: the system is not there (not asked again soon)."""


class DecisionFailed(Exception):
    """The session cannot decide this task now; the message is the reason users see."""


class Caller(Protocol):
    def post(self, url: str, body: bytes, timeout: float) -> bytes:
        """POST a JSON ``body`` to ``url`` and return the body of its HTTP 200 answer (at most
        :data:`MAX_BODY` bytes), within ``timeout`` seconds; raises :class:`CallError`."""
        ...


class _NoCaller:
    def post(self, url: str, body: bytes, timeout: float) -> bytes:
        raise Unreachable(f"POST {url}: this run has no HTTP client (offline)")


NO_CALLER: Caller = _NoCaller()
