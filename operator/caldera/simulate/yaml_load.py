"""Reading the YAML documents of one manifest file, fast, with the same result and errors as
PyYAML's ``safe_load_all``.

A dump of a 2,000-node cluster is tens of megabytes of YAML, and PyYAML's pure-Python loader
spends most of a simulation reading it. Three things make it several times faster without
changing what comes out:

- libyaml (PyYAML's C loader, in the PyYAML wheels) scans and parses when it is installed; the
  pure-Python loader is the fallback.
- The tag of a plain scalar depends only on its text (the safe loader has no path resolvers), so
  it is worked out once per distinct text in a file, not by the regular expressions at every
  occurrence (``name``, ``cpu``, ``Running`` ...).
- Documents are built by one direct walk over the node tree: strings, lists and dicts as they
  are, other scalars by the safe loader's own constructors. Anything less common (merge keys,
  ``!!set``, ``!!omap``, a node that contains itself, an unhashable key, an unknown tag) makes
  the whole document go through the safe loader's constructor instead, which builds or rejects it
  exactly as ``safe_load_all`` does.

When libyaml rejects a file, the file is read again by the pure-Python loader, which finds the
error and words it: the message and line are the same with or without libyaml, and the documents
before the error are kept.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from caldera.errors import yaml_problem

__all__ = ["load_documents"]

_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_SCALARS = {
    tag: yaml.SafeLoader.yaml_constructors[tag]
    for tag in (
        "tag:yaml.org,2002:null",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:binary",
        "tag:yaml.org,2002:timestamp",
    )
}
"""Scalar tags the direct walk builds with the safe loader's own constructor."""


class _Uncommon(Exception):
    """A document the direct walk leaves to the safe loader's constructor."""


class _Quick:
    """The tag memo and the direct walk, mixed into a safe loader (C or pure Python)."""

    yaml_path_resolvers: dict[Any, Any]

    def __init__(self, stream: str) -> None:
        super().__init__(stream)  # type: ignore[call-arg]
        self._tags: dict[str, str] = {}

    def resolve(self, kind: type[Node], value: str, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode and implicit[0] and not self.yaml_path_resolvers:
            tag = self._tags.get(value)
            if tag is None:
                tag = self._tags[value] = super().resolve(kind, value, implicit)  # type: ignore[misc]
            return tag
        return super().resolve(kind, value, implicit)  # type: ignore[misc,no-any-return]

    def construct_document(self, node: Node) -> Any:
        try:
            return self._build(node, {})
        except _Uncommon:
            return super().construct_document(node)  # type: ignore[misc]

    def _build(self, node: Node, built: dict[Node, Any]) -> Any:
        """The object for ``node``; ``built`` maps the nodes done so far to their object (an
        alias is the same node, and gets the same object) and the nodes under construction to
        None."""
        tag = node.tag
        if type(node) is ScalarNode:
            if tag == _STR:
                return node.value
            construct = _SCALARS.get(tag)
            if construct is None:
                raise _Uncommon
            return construct(self, node)
        if node in built:
            done = built[node]
            if done is None:  # a node inside itself
                raise _Uncommon
            return done
        built[node] = None
        data: Any
        if type(node) is MappingNode and tag == _MAP:
            data = {}
            for key_node, value_node in node.value:
                key = self._build(key_node, built)  # a merge key (<<) is _Uncommon
                if type(key) is not str and not isinstance(key, Hashable):
                    raise _Uncommon
                data[key] = self._build(value_node, built)
        elif type(node) is SequenceNode and tag == _SEQ:
            data = [self._build(item, built) for item in node.value]
        else:
            raise _Uncommon
        built[node] = data
        return data


class _PyLoader(_Quick, yaml.SafeLoader):
    pass


_C_LOADER: type[Any] | None = (
    type("_CLoader", (_Quick, yaml.CSafeLoader), {}) if hasattr(yaml, "CSafeLoader") else None
)
"""The libyaml loader, or None when PyYAML was installed without libyaml."""


def load_documents(name: str, text: str) -> tuple[list[Any], str | None, bool]:
    """The documents of one file, the problem that ended it early, if any, and whether that
    problem means the file is not YAML text at all (control bytes: an error, not a warning). At a
    YAML error the documents before it are kept (as ``kubectl apply`` applies them) and the rest
    of the file is skipped."""
    if _C_LOADER is not None:
        try:
            return list(yaml.load_all(text, Loader=_C_LOADER)), None, False
        except (yaml.YAMLError, ValueError, RecursionError):
            pass  # the pure-Python loader below finds the error and words it
    docs = []
    stream = yaml.load_all(text, Loader=_PyLoader)
    while True:
        try:
            docs.append(next(stream))
        except StopIteration:
            return docs, None, False
        except yaml.reader.ReaderError as exc:
            return docs, f"{name}: {yaml_problem(exc)}", True
        except RecursionError:
            return docs, f"{name}: invalid YAML: nested too deeply; rest of the file skipped", False
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or exc
            return docs, f"{name}: invalid YAML{where}: {problem}; rest of the file skipped", False
        except ValueError as exc:  # a scalar its explicit tag cannot hold: !!int abc
            return docs, f"{name}: invalid YAML: {exc}; rest of the file skipped", False
