"""How the command line speaks to its user: one line per message on stderr, and exit codes.

Every message is one line starting with ``caldera:`` (a newline inside a message, say in an
object's name, is folded), so scripts can grep stderr and a user never sees a traceback: a usage
error is one line with exit code 2, Ctrl-C ends any command with exit code 130, and an exception
nobody expected becomes one ``internal error`` line with exit code 70.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import NoReturn

__all__ = [
    "BROKEN_PIPE",
    "INTERNAL",
    "INTERRUPTED",
    "OK",
    "PROBLEMS",
    "USAGE",
    "Parser",
    "guarded",
    "out",
    "say",
]

OK = 0
PROBLEMS = 1
"""``--strict`` and some object was reported (``caldera run``: the leader lost its lease)."""
USAGE = 2
"""Bad arguments, a policy or input that cannot be used, a cluster that cannot be reached."""
INTERNAL = 70
"""A bug (EX_SOFTWARE)."""
INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT, as a shell reports it)."""
BROKEN_PIPE = 141
"""The reader of the output went away (128 + SIGPIPE)."""


def say(message: str) -> None:
    """One line on stderr."""
    sys.stderr.write("caldera: " + " ".join(message.split()) + "\n")


def out(text: str) -> None:
    """The command's output on stdout; characters the terminal cannot show are escaped."""
    try:
        sys.stdout.write(text)
    except UnicodeEncodeError:
        encoding = sys.stdout.encoding or "utf-8"
        sys.stdout.write(text.encode(encoding, "backslashreplace").decode(encoding))


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, pointing at ``--help`` for the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"caldera: {' '.join(message.split())} (see {self.prog} --help)\n")


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def guarded(command: Callable[[], int]) -> int:
    """Run a command; Ctrl-C, a closed pipe and unexpected exceptions end it in one line."""
    try:
        return command()
    except KeyboardInterrupt:
        say("interrupted")
        return INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE
    except Exception as exc:  # noqa: BLE001 - the last resort: no traceback reaches a user
        say(f"internal error: {type(exc).__name__}: {exc} (please report)")
        return INTERNAL
