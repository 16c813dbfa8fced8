"""Caldera's own exception hierarchy.

Scheduling verdicts are never exceptions (a task that fits nowhere is a normal answer); exceptions
are for bad input and bugs. Every error that reaches a user names the key or object at fault.
"""

from __future__ import annotations

import yaml

__all__ = ["CalderaError", "ConfigError", "yaml_problem"]


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


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line: what is wrong and where (line and column, from 1)."""
    if isinstance(exc, yaml.reader.ReaderError):
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return f"not a text file (character #x{code:04x} at position {exc.position})"
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or "unreadable"
    return f"invalid YAML{where}: {problem}"
