"""Progress feedback for long runs of the command line, on a terminal only.

A simulation of a few thousand nodes takes seconds; a person watching it should see it move,
while a pipe, a file, a CI log or a test must see nothing. So the line is shown only when the
stream is a terminal, rewritten in place (carriage return, erase to the end of the line), and
erased when the work is done, so that warnings and results start on a clean line. Whether the
stream is a terminal can be stated instead of asked, which is how the tests show both cases.
"""

from __future__ import annotations

from typing import TextIO

__all__ = ["Progress"]

_ERASE = "\r\x1b[K"
"""Back to the start of the line and erase it (ANSI "erase in line")."""


class Progress:
    """One rewritable status line on ``stream``; silent without a stream or off a terminal."""

    __slots__ = ("_on", "_shown", "_stream")

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None) -> None:
        self._stream = stream
        self._on = stream is not None and (stream.isatty() if tty is None else tty)
        self._shown = False

    @property
    def enabled(self) -> bool:
        return self._on

    def show(self, text: str) -> None:
        """Replace the status line with ``text``."""
        if self._stream is None or not self._on:
            return
        self._stream.write(_ERASE + text)
        self._stream.flush()
        self._shown = True

    def clear(self) -> None:
        """Erase the status line, if one is shown."""
        if self._stream is None or not self._shown:
            return
        self._stream.write(_ERASE)
        self._stream.flush()
        self._shown = False
