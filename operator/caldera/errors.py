"""Caldera's own exception hierarchy.

Scheduling verdicts are never exceptions (a task that fits nowhere is a normal answer); exceptions
are for bad input and bugs. Every error that reaches a user names the key or object at fault.
"""

from __future__ import annotations

__all__ = ["CalderaError", "ConfigError"]


class CalderaError(Exception):
    """Base of every error Caldera raises on purpose."""


class ConfigError(CalderaError):
    """A policy file, plugin argument or name that cannot be used.

    ``key`` is the path of the offending key in the file (``tiers[1].plugins[0].name``), so the
    message points straight at it.
    """

    def __init__(self, message: str, *, key: str = "", source: str = "") -> None:
        self.key = key
        self.source = source
        where = ": ".join(p for p in (source, key) if p)
        super().__init__(f"{where}: {message}" if where else message)
