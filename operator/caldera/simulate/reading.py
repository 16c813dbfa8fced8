"""Reading manifest files into YAML documents, on every core when the input is big.

Parsing YAML is most of the time of a simulation on a dumped cluster, and each file parses on its
own, so when there are several files and megabytes of them, worker processes parse them while
this process validates the documents of the files already done (in file order: the result is the
same as reading them one by one). Small inputs, stdin, a single file, a single core or a platform
without ``fork`` are read here, one file after the other: starting workers would cost more.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from caldera.simulate.yaml_load import load_documents

__all__ = ["FileDocuments", "read_files"]

PARALLEL_BYTES = 4 << 20
"""Input size (bytes) from which files are parsed by worker processes."""


@dataclass(frozen=True, slots=True)
class FileDocuments:
    name: str
    docs: list[Any]
    problem: str | None
    """Why the file ended early (invalid YAML); reported after its documents."""
    error: str | None = None
    """Why the file could not be read at all (missing, not text): the command stops."""


def _read(source: str) -> FileDocuments:
    name = "<stdin>" if source == "-" else source
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        return FileDocuments(name, [], None, f"{source}: cannot read: {exc.strerror or exc}")
    except UnicodeDecodeError:
        return FileDocuments(name, [], None, f"{source}: not a text file (not UTF-8)")
    docs, problem, fatal = load_documents(name, text)
    return FileDocuments(name, docs, None if fatal else problem, problem if fatal else None)


def _size(source: str) -> int:
    try:
        return os.path.getsize(source)
    except OSError:
        return 0


def _workers(files: Sequence[str]) -> int:
    """How many worker processes to parse ``files`` with; 0 to parse them here."""
    if len(files) < 2 or "-" in files:
        return 0
    if "fork" not in multiprocessing.get_all_start_methods():
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if (cores or 1) < 2 or sum(_size(f) for f in files) < PARALLEL_BYTES:
        return 0
    return min(cores or 1, len(files))


def read_files(files: Sequence[str]) -> Iterator[FileDocuments]:
    """The documents of each file, in the order of ``files``."""
    workers = _workers(files)
    if not workers:
        yield from map(_read, files)
        return
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        yield from pool.map(_read, files)
