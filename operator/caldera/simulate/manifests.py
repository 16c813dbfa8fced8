"""Reading manifests: multi-document YAML, ``kind: List``, files, directories or stdin.

Each object is validated on its own; a malformed one is reported (kind, name, field) and skipped
so the rest still load. A file that is not valid YAML keeps the documents before the error, as
``kubectl apply`` does. An input that cannot be read at all (a path that does not exist, a
directory without YAML files, a file that is not text) is an error instead: nothing in it can be
reported on, so the command stops.

Objects without a creation time get one from a fixed epoch in file order, which makes "older
first" follow the order of the manifests and keeps runs reproducible. How big inputs are read
fast: :mod:`caldera.simulate.reading` and :mod:`caldera.simulate.yaml_load`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from caldera.cache.state import ClusterState, StateObject
from caldera.models.kinds import KINDS, Kind, kind_for, kind_label, with_named
from caldera.models.parse import ObjectError, describe, parse_object
from caldera.simulate.progress import Progress
from caldera.simulate.reading import read_files

__all__ = ["EPOCH", "Loaded", "load_manifests"]

_PROGRESS_EVERY = 1000
"""Objects between two updates of the progress line."""

EPOCH = datetime(2025, 1, 1, tzinfo=UTC).timestamp()
"""Creation time given, in file order (1 ms apart), to objects that state none."""


@dataclass(slots=True)
class Loaded:
    state: ClusterState = field(default_factory=ClusterState)
    warnings: list[str] = field(default_factory=list)
    """Objects and documents that were skipped, and why (``--strict`` fails on them)."""
    notes: list[str] = field(default_factory=list)
    """Objects of kinds the scheduler does not use, ignored."""
    errors: list[str] = field(default_factory=list)
    """Inputs that could not be read at all."""


def _expand(sources: Sequence[str], errors: list[str]) -> list[str]:
    """Files as given; a directory stands for its ``*.yaml``/``*.yml`` files in name order."""
    files: list[str] = []
    for source in sources:
        path = Path(source)
        if source == "-":
            files.append(source)
        elif path.is_dir():
            found = sorted(str(p) for p in path.iterdir() if p.suffix in (".yaml", ".yml"))
            if not found:
                errors.append(f"{source}: no *.yaml or *.yml file in this directory")
            files += found
        elif not path.exists():
            errors.append(f"{source}: no such file or directory")
        else:
            files.append(source)
    return files


def _is_list(doc: Any) -> bool:
    """``kind: List`` as ``kubectl get -o yaml`` prints it, or a typed list (``PodList``) as the
    API returns it."""
    if not isinstance(doc, Mapping):
        return False
    kind = doc.get("kind")
    if kind == "List":
        return True
    return isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list)


def _documents(
    sources: Sequence[str], out: Loaded, progress: Progress
) -> Iterator[tuple[str, Any]]:
    files = _expand(sources, out.errors)
    count = 0

    def show(number: int) -> None:
        progress.show(f"reading manifests: file {number}/{len(files)}, {count:,} objects")

    show(1)
    for number, read in enumerate(read_files(files), 1):
        show(number)
        for doc in read.docs:
            if doc is None:
                continue
            if not _is_list(doc):
                items = [doc]
            elif isinstance(doc.get("items") or [], list):
                items = doc.get("items") or []
            else:
                out.warnings.append(f"{read.name}: skipped a List whose items are not a list")
                continue
            for item in items:
                count += 1
                if count % _PROGRESS_EVERY == 0:
                    show(number)
                yield read.name, item
        if read.error is not None:
            out.errors.append(read.error)
        elif read.problem is not None:
            out.warnings.append(read.problem)


def load_manifests(
    sources: Sequence[str],
    progress: Progress | None = None,
    *,
    epoch: float = EPOCH,
    named: Iterable[tuple[str, str]] = (),
) -> Loaded:
    """The objects of ``sources``; those stating no creation time get one from ``epoch`` on.
    ``named`` (kind, ``namespace/name``: the policy's :attr:`~caldera.framework.policy.Policy.
    read_objects`) are kept where their kind is read only by label. What was skipped, and why,
    is in ``warnings``; inputs that could not be read, in ``errors``."""
    shown = progress or Progress()
    try:
        return _load(sources, shown, epoch, with_named(KINDS, named))
    finally:
        shown.clear()


def _load(
    sources: Sequence[str], progress: Progress, epoch: float, kinds: Mapping[str, Kind]
) -> Loaded:
    out = Loaded()
    order = 0
    for source, doc in _documents(sources, out, progress):
        if not isinstance(doc, Mapping):
            out.warnings.append(f"{source}: skipped a document that is not an object")
            continue
        kind = doc.get("kind")
        if not isinstance(kind, str) or not kind:
            out.warnings.append(
                f"{source}: skipped an object without kind {describe('', doc)}: "
                "kind must be a non-empty string"
            )
            continue
        known = kind_for(doc.get("apiVersion"), kind)
        if known is None:
            out.notes.append(
                f"{source}: ignored {kind} {describe(kind, doc)}: kind not used by the scheduler"
            )
            continue
        kind = known.name
        known = kinds[kind]
        raw = _as_json(doc)
        if not known.selects(_labels(raw), _key(known, raw)):
            picked = " or ".join(known.label_selectors)
            out.notes.append(
                f"{source}: ignored {kind} {describe('', doc)}: not labelled {picked}, "
                f"the only {kind}s the scheduler reads"
            )
            continue
        meta = raw.get("metadata")
        if isinstance(meta, Mapping) and not meta.get("creationTimestamp"):
            raw["metadata"] = {**meta, "creationTimestamp": epoch + order / 1000.0}
        order += 1
        obj = parse_object(str(kind), raw)
        if not isinstance(obj, StateObject):
            out.warnings.append(f"{source}: {obj}; skipped")
            if isinstance(obj, ObjectError):
                out.state.invalid[f"{kind}/{obj.name}"] = obj.message
            continue
        if out.state.add(obj):
            out.warnings.append(
                f"{source}: {kind_label(kind)} {describe(kind, raw)} appears twice; "
                "the last one is used"
            )
    return out


def _as_json(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` as the API server would serve it: PyYAML reads an unquoted time as a datetime,
    the API (and the slim records' decoder) as its RFC 3339 text."""
    try:
        out: dict[str, Any] = msgspec.to_builtins(doc)
    except (TypeError, ValueError):  # not JSON-like at all: the parser says where
        return dict(doc)
    return out


def _key(kind: Kind, raw: Mapping[str, Any]) -> str:
    meta = raw.get("metadata")
    if not isinstance(meta, Mapping):
        return ""
    namespace, name = meta.get("namespace"), meta.get("name")
    return kind.key(namespace if isinstance(namespace, str) else None, str(name))


def _labels(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's labels as written (none when they are not a map)."""
    meta = raw.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}
