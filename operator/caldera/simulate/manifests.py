"""Reading manifests: multi-document YAML, ``kind: List``, files, directories or stdin.

Each object is validated on its own; a malformed one is reported (kind, name, field) and skipped
so the rest still load. An input that cannot be read at all (a path that does not exist, a
directory without YAML files, a file that is not text) is an error instead: nothing in it can be
reported on, so the command stops.

Objects without a creation time get one from a fixed epoch in file order, which makes "older
first" follow the order of the manifests and keeps runs reproducible.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from caldera.cache.state import ClusterState, StateObject
from caldera.errors import yaml_problem
from caldera.models.parse import KINDS, ObjectError, describe, parse_object

__all__ = ["EPOCH", "Loaded", "load_manifests"]

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


def _expand(sources: Sequence[str], errors: list[str]) -> Iterator[str]:
    """Files as given; a directory stands for its ``*.yaml``/``*.yml`` files in name order."""
    for source in sources:
        path = Path(source)
        if source == "-":
            yield source
        elif path.is_dir():
            found = sorted(str(p) for p in path.iterdir() if p.suffix in (".yaml", ".yml"))
            if not found:
                errors.append(f"{source}: no *.yaml or *.yml file in this directory")
            yield from found
        elif not path.exists():
            errors.append(f"{source}: no such file or directory")
        else:
            yield source


def _read(source: str, errors: list[str]) -> str | None:
    try:
        return sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        errors.append(f"{source}: cannot read: {exc.strerror or exc}")
    except UnicodeDecodeError:
        errors.append(f"{source}: not a text file (not UTF-8)")
    return None


def _documents(sources: Sequence[str], out: Loaded) -> Iterator[tuple[str, Any]]:
    for source in _expand(sources, out.errors):
        text = _read(source, out.errors)
        if text is None:
            continue
        name = "<stdin>" if source == "-" else source
        for doc in _parse_yaml(name, text, out):
            if doc is None:
                continue
            if not _is_list(doc):
                yield name, doc
            elif isinstance(doc.get("items") or [], list):
                for item in doc.get("items") or []:
                    yield name, item
            else:
                out.warnings.append(f"{name}: skipped a List whose items are not a list")


def _is_list(doc: Any) -> bool:
    """``kind: List`` as ``kubectl get -o yaml`` prints it, or a typed list (``PodList``) as the
    API returns it."""
    if not isinstance(doc, Mapping):
        return False
    kind = doc.get("kind")
    if kind == "List":
        return True
    return isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list)


def _parse_yaml(name: str, text: str, out: Loaded) -> Iterator[Any]:
    """The documents of one file; at a YAML error, the documents before it are kept (as
    ``kubectl apply`` applies them) and the rest of the file is skipped with a warning. A file
    with characters YAML does not allow (NUL and other control bytes) is not text: an error."""
    warnings = out.warnings
    docs = yaml.safe_load_all(text)
    while True:
        try:
            doc = next(docs)
        except StopIteration:
            return
        except yaml.reader.ReaderError as exc:
            out.errors.append(f"{name}: {yaml_problem(exc)}")
            return
        except RecursionError:
            warnings.append(f"{name}: invalid YAML: nested too deeply; rest of the file skipped")
            return
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or exc
            warnings.append(f"{name}: invalid YAML{where}: {problem}; rest of the file skipped")
            return
        yield doc


def load_manifests(sources: Sequence[str], *, epoch: float = EPOCH) -> Loaded:
    """The objects of ``sources``; those stating no creation time get one from ``epoch`` on."""
    out = Loaded()
    order = 0
    for source, doc in _documents(sources, out):
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
        if kind not in KINDS:
            out.notes.append(
                f"{source}: ignored {kind} {describe(kind, doc)}: kind not used by the scheduler"
            )
            continue
        raw = dict(doc)
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
                f"{source}: {kind} {describe(str(kind), raw)} appears twice; the last one is used"
            )
    return out
