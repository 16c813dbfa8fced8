"""Log setup and object references for structured logs.

Logging goes through kopf's formatters, so ``--log-format json`` gives one JSON object per line
for kopf's messages and ours alike; our object-specific lines carry ``extra=about(...)``, which
the JSON formatter renders as an ``object`` field (kind, namespace, name) and the text formats
ignore (the message names the object anyway).
"""

from __future__ import annotations

import logging

import kopf

from caldera.console import say

__all__ = ["FORMATS", "about", "configure", "fail"]

FORMATS = {"plain": kopf.LogFormat.PLAIN, "full": kopf.LogFormat.FULL, "json": kopf.LogFormat.JSON}


def configure(log_format: str = "full", *, verbose: bool = False) -> None:
    kopf.configure(verbose=verbose, log_format=FORMATS[log_format], log_refkey="object")
    if not verbose:
        # kopf says "Handler … succeeded" at INFO for every Queue event it handles (each status
        # write is one): routine, so only its warnings and errors are kept
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)


def about(kind: str, name: str, namespace: str | None = None) -> dict[str, object]:
    """``extra=`` for a log call about one object."""
    ref = {"kind": kind, "name": name}
    if namespace:
        ref["namespace"] = namespace
    return {"k8s_ref": ref}


def fail(message: str) -> None:
    """The one line a command that cannot start leaves on stderr."""
    say(message)
