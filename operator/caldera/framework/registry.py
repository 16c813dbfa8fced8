"""Per-instance registries of plugin and action classes, found through entry points.

Built-in plugins and actions are declared in Caldera's own ``pyproject.toml`` under the same
``caldera.plugins`` / ``caldera.actions`` groups a third-party package uses, so there is one way in.
Classes are imported only when a policy names them. Unknown and ambiguous names are errors.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, TypeVar

from caldera.errors import ConfigError
from caldera.framework.outside import NO_CALLER, Caller
from caldera.framework.plugin import Action, Plugin

__all__ = ["Registry"]

PLUGIN_GROUP = "caldera.plugins"
ACTION_GROUP = "caldera.actions"

C = TypeVar("C")


class _Table:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._loaders: dict[str, list[Callable[[], Any]]] = {}
        self._loaded: dict[str, Any] = {}

    def add(self, name: str, loader: Callable[[], Any]) -> None:
        self._loaders.setdefault(name, []).append(loader)
        self._loaded.pop(name, None)

    def get(self, name: str) -> Any:
        if name in self._loaded:
            return self._loaded[name]
        loaders = self._loaders.get(name)
        if not loaders:
            known = ", ".join(sorted(self._loaders)) or "none"
            raise ConfigError(f"unknown {self.kind} {name!r} (known: {known})")
        if len(loaders) > 1:
            raise ConfigError(f"{self.kind} {name!r} is provided by {len(loaders)} packages")
        try:
            cls = loaders[0]()
        except Exception as exc:  # a broken third-party package must not crash the loader
            raise ConfigError(
                f"{self.kind} {name!r} cannot be loaded: {type(exc).__name__}: {exc}"
            ) from exc
        found = getattr(cls, "name", None)
        if found != name:
            raise ConfigError(f"{self.kind} {name!r} resolves to a class named {found!r}")
        self._loaded[name] = cls
        return cls

    def names(self) -> list[str]:
        return sorted(self._loaders)


class Registry:
    def __init__(self) -> None:
        self._plugins = _Table("plugin")
        self._actions = _Table("action")
        self.memory: dict[str, Any] = {}
        """What plugins keep from one session to the next (by plugin name; tdm's last eviction
        time): a registry lives as long as the scheduler process or the simulation using it,
        and a plugin instance only as long as one session."""
        self.caller: Caller = NO_CALLER
        """How sessions reach systems outside the cluster (extenders): the shell that runs them
        gives a real client (:class:`caldera.outside.http.HttpCaller`); none refuses every
        call."""

    @classmethod
    def from_entry_points(cls) -> Registry:
        reg = cls()
        for ep in entry_points(group=PLUGIN_GROUP):
            reg._plugins.add(ep.name, ep.load)
        for ep in entry_points(group=ACTION_GROUP):
            reg._actions.add(ep.name, ep.load)
        return reg

    def add_plugin(self, plugin: type[Plugin[Any]]) -> None:
        self._plugins.add(plugin.name, lambda: plugin)

    def add_action(self, action: type[Action[Any]]) -> None:
        self._actions.add(action.name, lambda: action)

    def plugin(self, name: str) -> type[Plugin[Any]]:
        cls: type[Plugin[Any]] = self._plugins.get(name)
        return cls

    def action(self, name: str) -> type[Action[Any]]:
        cls: type[Action[Any]] = self._actions.get(name)
        return cls

    def plugin_names(self) -> list[str]:
        return self._plugins.names()

    def action_names(self) -> list[str]:
        return self._actions.names()
