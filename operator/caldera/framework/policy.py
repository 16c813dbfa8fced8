"""The scheduler policy: Volcano's ``volcano-scheduler.conf`` format, validated up front.

A policy names the actions to run (in order), the plugin tiers with their per-plugin switches and
arguments, and per-action arguments under ``configurations``. Everything is checked when the file
loads: malformed YAML, unknown keys, unknown action or plugin names, wrong argument types and
Volcano's drf/proportion hierarchy conflict all raise :class:`~caldera.errors.ConfigError` naming
the exact key, so a bad file never reaches a session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from caldera.errors import ConfigError, yaml_problem
from caldera.framework.plugin import Args
from caldera.framework.points import POINT_FLAGS
from caldera.framework.registry import Registry

__all__ = [
    "DEFAULT_POLICY_YAML",
    "ActionSpec",
    "PluginOption",
    "Policy",
    "default_policy",
    "load_policy",
    "load_policy_file",
]

DEFAULT_POLICY_YAML = """\
# Volcano's built-in fallback configuration (DefaultSchedulerConf).
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""

_TOP_KEYS = frozenset({"actions", "tiers", "configurations", "metrics"})
_HIERARCHY = "enableHierarchy"


@dataclass(frozen=True, slots=True)
class PluginOption:
    name: str
    args: Args
    disabled: frozenset[str] = frozenset()
    """Extension points this plugin's ``enableXxx: false`` switches turn off."""
    hierarchy: bool = False
    managed: frozenset[str] = frozenset()
    """Resources the plugin accounts for itself (kept out of the generic resource fit)."""

    def enabled(self, point: str) -> bool:
        return point not in self.disabled


@dataclass(frozen=True, slots=True)
class ActionSpec:
    name: str
    args: Args


@dataclass(frozen=True, slots=True)
class Policy:
    actions: tuple[ActionSpec, ...]
    tiers: tuple[tuple[PluginOption, ...], ...]
    metrics: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""

    @property
    def layout(self) -> list[list[str]]:
        return [[opt.name for opt in tier] for tier in self.tiers]

    @property
    def managed_resources(self) -> frozenset[str]:
        """Resources some plugin accounts for itself: the snapshot leaves them out of requests
        and capacities, so the generic fit never sees them (nodes do not advertise them)."""
        return frozenset().union(*(opt.managed for tier in self.tiers for opt in tier))

    def option(self, plugin: str) -> PluginOption | None:
        for tier in self.tiers:
            for opt in tier:
                if opt.name == plugin:
                    return opt
        return None


def _validate_args(model: type[Args], raw: Any, key: str, source: str) -> Args:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError("must be a map of argument name to value", key=key, source=source)
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = "".join(f"[{p!r}]" if isinstance(p, str) else f"[{p}]" for p in err["loc"])
        raise ConfigError(err["msg"], key=f"{key}{loc}", source=source) from None


def _plugin_option(raw: Any, key: str, registry: Registry, source: str) -> PluginOption:
    if not isinstance(raw, Mapping):
        raise ConfigError("must be a map with at least 'name'", key=key, source=source)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError("missing or empty plugin name", key=f"{key}.name", source=source)
    try:
        cls = registry.plugin(name)
    except ConfigError as exc:
        raise ConfigError(str(exc), key=f"{key}.name", source=source) from None
    disabled: set[str] = set()
    hierarchy = False
    for opt_key, value in raw.items():
        if opt_key in ("name", "arguments"):
            continue
        if opt_key != _HIERARCHY and opt_key not in POINT_FLAGS:
            raise ConfigError("unknown plugin option", key=f"{key}.{opt_key}", source=source)
        if not isinstance(value, bool):
            raise ConfigError(
                f"must be true or false, not {value!r}", key=f"{key}.{opt_key}", source=source
            )
        if opt_key == _HIERARCHY:
            hierarchy = value
        elif not value:
            disabled.update(POINT_FLAGS[opt_key])
    args = _validate_args(cls.Args, raw.get("arguments"), f"{key}.arguments", source)
    return PluginOption(
        name=name,
        args=args,
        disabled=frozenset(disabled),
        hierarchy=hierarchy,
        managed=cls.managed_resources(args),
    )


def _actions(raw: Any, registry: Registry, source: str) -> list[str]:
    if not isinstance(raw, str):
        raise ConfigError("must be a comma-separated string", key="actions", source=source)
    names = [part.strip() for part in raw.split(",")]
    if not any(names):
        raise ConfigError("names no action", key="actions", source=source)
    seen: set[str] = set()
    for i, name in enumerate(names):
        if not name:
            raise ConfigError(
                f"empty action name at position {i + 1}", key="actions", source=source
            )
        if name in seen:
            raise ConfigError(f"action {name!r} listed twice", key="actions", source=source)
        seen.add(name)
        try:
            registry.action(name)
        except ConfigError as exc:
            raise ConfigError(str(exc), key="actions", source=source) from None
    return names


def _configurations(raw: Any, registry: Registry, source: str) -> dict[str, Args]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ConfigError(
            "must be a list of {name, arguments}", key="configurations", source=source
        )
    out: dict[str, Args] = {}
    for i, item in enumerate(raw):
        key = f"configurations[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError("must be a map with 'name'", key=key, source=source)
        extra = set(item) - {"name", "arguments"}
        if extra:
            raise ConfigError("unknown key", key=f"{key}.{min(extra)}", source=source)
        name = item.get("name")
        if not isinstance(name, str):
            raise ConfigError("missing action name", key=f"{key}.name", source=source)
        try:
            cls = registry.action(name)
        except ConfigError as exc:
            raise ConfigError(str(exc), key=f"{key}.name", source=source) from None
        out[name] = _validate_args(cls.Args, item.get("arguments"), f"{key}.arguments", source)
    return out


def load_policy(text: str, registry: Registry, *, source: str = "") -> Policy:
    """Parse and validate a policy; raises ConfigError naming the key at fault."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(yaml_problem(exc), source=source) from None
    except RecursionError:
        raise ConfigError("invalid YAML: nested too deeply", source=source) from None
    if not isinstance(raw, Mapping):
        raise ConfigError("the policy must be a YAML map", source=source)
    for key in raw:
        if key not in _TOP_KEYS:
            raise ConfigError("unknown key", key=str(key), source=source)
    if "actions" not in raw:
        raise ConfigError(
            'missing (e.g. actions: "enqueue, allocate")', key="actions", source=source
        )
    action_names = _actions(raw["actions"], registry, source)
    configured = _configurations(raw.get("configurations"), registry, source)

    tiers_raw = raw.get("tiers") or []
    if not isinstance(tiers_raw, list):
        raise ConfigError("must be a list of {plugins: [...]}", key="tiers", source=source)
    tiers: list[tuple[PluginOption, ...]] = []
    seen: dict[str, str] = {}
    for t, tier in enumerate(tiers_raw):
        key = f"tiers[{t}]"
        if not isinstance(tier, Mapping) or set(tier) - {"plugins"}:
            raise ConfigError("must be a map with only 'plugins'", key=key, source=source)
        plugins = tier.get("plugins") or []
        if not isinstance(plugins, list):
            raise ConfigError("must be a list", key=f"{key}.plugins", source=source)
        options = []
        for p, item in enumerate(plugins):
            pkey = f"{key}.plugins[{p}]"
            opt = _plugin_option(item, pkey, registry, source)
            if opt.name in seen:
                raise ConfigError(
                    f"plugin {opt.name!r} already configured at {seen[opt.name]}",
                    key=f"{pkey}.name",
                    source=source,
                )
            seen[opt.name] = pkey
            options.append(opt)
        tiers.append(tuple(options))

    drf = next((o for tier in tiers for o in tier if o.name == "drf"), None)
    if drf is not None and drf.hierarchy and "proportion" in seen:
        raise ConfigError(
            "drf with enableHierarchy: true conflicts with proportion; use one of them",
            key=f"{seen['drf']}.enableHierarchy",
            source=source,
        )
    for opt in (o for tier in tiers for o in tier if o.hierarchy):
        if not registry.plugin(opt.name).supports_hierarchy:
            raise ConfigError(
                f"plugin {opt.name!r} does not implement hierarchical queues yet",
                key=f"{seen[opt.name]}.enableHierarchy",
                source=source,
            )
    metrics = raw.get("metrics") or {}
    if not isinstance(metrics, Mapping):
        raise ConfigError("must be a map", key="metrics", source=source)

    actions = []
    for name in action_names:
        args = configured.get(name)
        if args is None:
            args = _validate_args(registry.action(name).Args, {}, "actions", source)
        actions.append(ActionSpec(name=name, args=args))
    return Policy(actions=tuple(actions), tiers=tuple(tiers), metrics=dict(metrics), source=source)


def load_policy_file(path: str | Path, registry: Registry) -> Policy:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read policy file: {exc.strerror}", source=str(p)) from None
    except UnicodeDecodeError:
        raise ConfigError("not a text file (not UTF-8)", source=str(p)) from None
    return load_policy(text, registry, source=str(p))


def default_policy(registry: Registry) -> Policy:
    return load_policy(DEFAULT_POLICY_YAML, registry, source="<built-in default>")
