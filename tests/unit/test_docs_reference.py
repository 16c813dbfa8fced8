"""The user reference (docs/guide/actions.md, docs/guide/plugins.md) against the code: every
registered action and plugin has its section, and every argument key a plugins-page table
documents is one the plugin's ``Args`` model reads.

Table keys are written as the policy writes them. A nested map is a path (``sra.enable`` is
``enable:`` under ``sra:``), a list is ``[]`` (``strategies[].name``) and a name the user
chooses is a placeholder in angle brackets (``binpack.resources.<name>``).
"""

from __future__ import annotations

import re
import types
import typing
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from caldera.framework.plugin import Args
from caldera.framework.tolerance import argument_keys

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide"
ACTIONS_PAGE = GUIDE / "actions.md"
PLUGINS_PAGE = GUIDE / "plugins.md"

READ_BY_VALIDATOR = {("tdm", "tdm.revocable-zone.<zone>"): "zones"}
"""Documented keys an ``Args`` model gathers in a validator into a field of another name."""

_PLACEHOLDER = re.compile(r"<[^<>.]+>")
_TABLE_KEY = re.compile(r"^\| `([^`]+)` \|")


def _registered(group: str) -> dict[str, Any]:
    return {ep.name: ep.load() for ep in entry_points(group=group)}


def _sections(page: Path) -> dict[str, list[str]]:
    """``## <name>`` heading → the lines of its section."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    return sections


def _table_keys(lines: list[str]) -> list[str]:
    """The first-column keys of the section's ``| key | default | meaning |`` table."""
    return [m.group(1) for line in lines if (m := _TABLE_KEY.match(line)) and m.group(1) != "key"]


def _inner(annotation: Any) -> tuple[str, Any]:
    """How a field nests: ("model", M), ("list", item), ("map", value) or ("leaf", None)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "model", annotation
    origin = typing.get_origin(annotation)
    targs = typing.get_args(annotation)
    if origin in (list, tuple) and targs:
        return "list", targs[0]
    if origin is dict and len(targs) == 2:
        return "map", targs[1]
    if origin in (typing.Union, types.UnionType):
        for arg in targs:
            kind, inner = _inner(arg)
            if kind != "leaf":
                return kind, inner
    return "leaf", None


def _below(annotation: Any, rest: str) -> bool:
    """Whether ``rest`` (what follows a field's key) names something inside the field."""
    if not rest:
        return True
    kind, inner = _inner(annotation)
    if kind == "list" and rest.startswith("[]"):
        return _below(inner, rest[2:])
    if not rest.startswith("."):
        return False
    rest = rest[1:]
    if kind == "model":
        return _resolves(inner, rest)
    if kind == "map":
        m = _PLACEHOLDER.match(rest)
        return m is not None and _below(inner, rest[m.end() :])
    return False


def _resolves(model: type[BaseModel], key: str) -> bool:
    """Whether ``key`` is read by ``model``: one of its keys, a ``<prefix>*`` key's placeholder, or
    a path into a nested model, list or map."""
    for name, info in model.model_fields.items():
        alias = info.alias or name
        if alias.endswith("*") and _PLACEHOLDER.fullmatch(key.removeprefix(alias[:-1])):
            return True
        if key.startswith(alias) and _below(info.annotation, key[len(alias) :]):
            return True
    return False


def test_every_action_has_a_section_on_the_actions_page() -> None:
    sections = _sections(ACTIONS_PAGE)
    missing = sorted(set(_registered("caldera.actions")) - set(sections))
    assert not missing, f"no '## <name>' section in {ACTIONS_PAGE.name} for {missing}"


def test_every_plugin_has_a_section_on_the_plugins_page() -> None:
    sections = _sections(PLUGINS_PAGE)
    missing = sorted(set(_registered("caldera.plugins")) - set(sections))
    assert not missing, f"no '## <name>' section in {PLUGINS_PAGE.name} for {missing}"


@pytest.mark.parametrize("name", sorted(_registered("caldera.plugins")))
def test_every_documented_plugin_argument_is_read_by_the_plugin(name: str) -> None:
    model: type[Args] = _registered("caldera.plugins")[name].Args
    documented = _table_keys(_sections(PLUGINS_PAGE).get(name, []))
    unknown = [
        key
        for key in documented
        if not _resolves(model, key)
        and READ_BY_VALIDATOR.get((name, key)) not in model.model_fields
    ]
    assert not unknown, f"{name}: documented keys not in {model.__name__}: {unknown}"


def _documents(documented: list[str], key: str) -> bool:
    """Whether one of the ``documented`` keys is ``key`` or lies inside it."""
    if key.endswith("*"):
        return any(d.startswith(key[:-1]) for d in documented)
    return any(d == key or d.startswith((f"{key}.", f"{key}[]")) for d in documented)


@pytest.mark.parametrize("name", sorted(_registered("caldera.plugins")))
def test_every_top_level_plugin_argument_is_documented(name: str) -> None:
    model: type[Args] = _registered("caldera.plugins")[name].Args
    documented = _table_keys(_sections(PLUGINS_PAGE).get(name, []))
    gathered = {
        field
        for (plugin, key), field in READ_BY_VALIDATOR.items()
        if plugin == name and key in documented
    }
    undocumented = [
        key
        for key in argument_keys(model)
        if key not in gathered and not _documents(documented, key)
    ]
    assert not undocumented, f"{name}: arguments missing from the plugins page: {undocumented}"


def test_the_action_tables_name_only_keys_the_actions_read() -> None:
    actions = _registered("caldera.actions")
    sections = _sections(ACTIONS_PAGE)
    for name, cls in actions.items():
        documented = set(_table_keys(sections.get(name, [])))
        keys = set(argument_keys(cls.Args))
        assert documented == keys, f"{name}: page {sorted(documented)} != code {sorted(keys)}"
