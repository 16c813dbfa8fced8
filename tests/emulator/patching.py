"""The three PATCH flavours the apiserver accepts from kopf and kubernetes-asyncio.

* ``application/merge-patch+json`` — RFC 7386 (kopf uses it for everything).
* ``application/strategic-merge-patch+json`` — what kubernetes-asyncio sends for a dict body on
  built-in types: a merge patch whose lists of objects merge by a per-field key (pod conditions by
  ``type``, containers by ``name``), whose ``metadata.finalizers`` merge as a set, and which
  understands the ``$patch: delete|replace`` and ``$deleteFromPrimitiveList`` directives.
* ``application/json-patch+json`` — RFC 6902 operations, sent for a list body.

All functions are pure: they return new documents and never modify their inputs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


class PatchError(ValueError):
    """The patch cannot be applied to this object (the apiserver answers 422)."""


class MalformedPatchError(PatchError):
    """The patch body itself is not a valid patch of its type (the apiserver answers 400)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, ``null`` deletes, the rest replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any, merge_keys: Mapping[str, str]) -> Any:
    """A strategic merge patch; ``merge_keys`` maps dotted field paths to list merge keys."""
    return _smp(target, patch, merge_keys, "")


def _smp(target: Any, patch: Any, merge_keys: Mapping[str, str], path: str) -> Any:
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive is not None:
        raise PatchError(f"unknown patch directive {directive!r} at {path or '<root>'}")

    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            drop = value if isinstance(value, list) else []
            result[field] = [item for item in result.get(field) or [] if item not in drop]
            continue
        if key.startswith(("$setElementOrder/", "$retainKeys")):
            continue  # ordering/retention hints: the emulator keeps the natural order
        child = f"{path}.{key}" if path else key
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and child in merge_keys:
            result[key] = _merge_list(result.get(key) or [], value, merge_keys, child)
        else:
            merged = _smp(result.get(key), value, merge_keys, child)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    return result


def _merge_list(
    current: list[Any], patch: list[Any], merge_keys: Mapping[str, str], path: str
) -> list[Any]:
    key = merge_keys[path]
    if not key:  # a set of scalars (e.g. finalizers): union, keeping the existing order first
        merged = list(current)
        merged.extend(item for item in patch if item not in merged)
        return merged
    if any(isinstance(item, Mapping) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(item) for item in patch if not _is_directive(item)]
    result = [copy.deepcopy(item) for item in current]
    for item in patch:
        if not isinstance(item, Mapping) or key not in item:
            raise PatchError(f"{path}: list items must be objects with the merge key {key!r}")
        index = next(
            (i for i, existing in enumerate(result) if existing.get(key) == item[key]), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append(_smp(None, item, merge_keys, path))
        else:
            result[index] = _smp(result[index], item, merge_keys, path)
    return result


def _is_directive(item: Any) -> bool:
    return isinstance(item, Mapping) and set(item) == {"$patch"}


# -- RFC 6902 JSON patch ------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(container: list[Any], token: str, *, for_insert: bool) -> int:
    if token == "-" and for_insert:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r}")
    index = int(token)
    limit = len(container) if for_insert else len(container) - 1
    if index > limit:
        raise PatchError(f"array index {index} out of range")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    current = doc
    for token in tokens[:-1]:
        if isinstance(current, dict):
            if token not in current:
                raise PatchError(f"path segment {token!r} does not exist")
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, for_insert=False)]
        else:
            raise PatchError(f"cannot traverse into a scalar at {token!r}")
    return current


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {'/'.join(tokens)!r} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_insert=False)]
    raise PatchError("cannot index a scalar")


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {'/'.join(tokens)!r} does not exist")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, for_insert=False))
    raise PatchError("cannot remove from a scalar")


def _add(doc: Any, tokens: list[str], value: Any, *, replace: bool) -> Any:
    if not tokens:
        return copy.deepcopy(value)
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"path {'/'.join(tokens)!r} does not exist")
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if replace:
            parent[_index(parent, last, for_insert=False)] = copy.deepcopy(value)
        else:
            parent.insert(_index(parent, last, for_insert=True), copy.deepcopy(value))
    else:
        raise PatchError("cannot add into a scalar")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """Apply RFC 6902 operations (add, remove, replace, move, copy, test)."""
    if not isinstance(operations, list):
        raise MalformedPatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, Mapping) or "op" not in op or "path" not in op:
            raise MalformedPatchError(f"malformed JSON patch operation: {op!r}")
        tokens = _pointer(op["path"])
        match op["op"]:
            case "add":
                doc = _add(doc, tokens, op.get("value"), replace=False)
            case "replace":
                doc = _add(doc, tokens, op.get("value"), replace=True)
            case "remove":
                _remove(doc, tokens)
            case "move":
                value = _remove(doc, _pointer(op["from"]))
                doc = _add(doc, tokens, value, replace=False)
            case "copy":
                value = _get(doc, _pointer(op["from"]))
                doc = _add(doc, tokens, value, replace=False)
            case "test":
                if _get(doc, tokens) != op.get("value"):
                    raise PatchError(f"test operation failed at {op['path']!r}")
            case other:
                raise PatchError(f"unknown JSON patch operation {other!r}")
    return doc
