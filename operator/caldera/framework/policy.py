"""The scheduler policy: Volcano's ``volcano-scheduler.conf`` format, validated up front.

A policy names the actions to run (in order), the plugin tiers with their per-plugin switches and
arguments, and per-action arguments under ``configurations``. Everything is checked when the file
loads: malformed YAML, unknown action names, wrong argument values and Volcano's drf/proportion
hierarchy conflict raise :class:`~caldera.errors.ConfigError` naming the exact key, so a bad file
never reaches a session. What Volcano passes over (a key nothing reads, a plugin it does not
have) is a warning on the policy instead, or an error when loaded ``strict``
(:mod:`caldera.framework.tolerance`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from caldera.errors import ConfigError
from caldera.framework.plugin import Args, PluginOption
from caldera.framework.points import POINT_FLAGS, switched_off
from caldera.framework.registry import Registry
from caldera.framework.tolerance import (
    PolicyWarning,
    Warnings,
    argument_keys,
    did_you_mean,
    first_document,
    validate_args,
)

__all__ = [
    "DEFAULT_POLICY_YAML",
    "PLUGIN_CONFIGURATIONS",
    "ActionSpec",
    "Policy",
    "PolicyWarning",
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
PLUGIN_CONFIGURATIONS = frozenset({"init-params"})
"""``configurations`` entries a plugin reads, not an action: MindCluster's ``init-params``
(deviceshare's Ascend vNPUs, :class:`~caldera.devices.mindcluster_info.InitParams`; Volcano hands
every entry to the session, ``ssn.Configurations``). Kept as written, never warned about: their
other keys are read by MindCluster's own components."""
_HIERARCHY = "enableHierarchy"


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
    warnings: tuple[PolicyWarning, ...] = ()
    """What the policy says that no part of Caldera reads, passed over as Volcano does."""
    configurations: tuple[Mapping[str, Any], ...] = ()
    """The ``configurations`` entries of :data:`PLUGIN_CONFIGURATIONS`, as written, in order."""

    @property
    def layout(self) -> list[list[str]]:
        return [[opt.key for opt in tier] for tier in self.tiers]

    @property
    def managed_resources(self) -> frozenset[str]:
        """Resources some plugin accounts for itself: the snapshot leaves them out of requests
        and capacities, so the generic fit never sees them (nodes do not advertise them)."""
        return frozenset().union(*(opt.managed for tier in self.tiers for opt in tier))

    @property
    def read_objects(self) -> frozenset[tuple[str, str]]:
        """Objects some plugin reads by name (kind, ``namespace/name``): the operator watches
        each, and a manifest's are kept."""
        return frozenset().union(*(opt.reads for tier in self.tiers for opt in tier))

    def option(self, plugin: str) -> PluginOption | None:
        """The entry whose key (its name, unless the plugin is listed more than once) is
        ``plugin``."""
        for tier in self.tiers:
            for opt in tier:
                if opt.key == plugin:
                    return opt
        return None


def _plugin_option(raw: Any, key: str, registry: Registry, warn: Warnings) -> PluginOption | None:
    """The plugin entry at ``key``; None for a plugin Caldera does not have (a warning)."""
    source = warn.source
    if not isinstance(raw, Mapping):
        raise ConfigError("must be a map with at least 'name'", key=key, source=source)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError("missing or empty plugin name", key=f"{key}.name", source=source)
    known = registry.plugin_names()
    if name not in known:
        # OpenSession: "Failed to get plugin", and the session goes on without it
        warn.add(
            f"{key}.name",
            f"unknown plugin {name!r}{did_you_mean(name, known)}: neither built in nor "
            "installed as an entry point",
            then="the other plugins run without it",
        )
        return None
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
            options = [*POINT_FLAGS, _HIERARCHY]
            if str(opt_key) in argument_keys(cls.Args):
                hint = " (an argument: it belongs under 'arguments:')"
            else:
                hint = did_you_mean(str(opt_key), options)
            warn.add(f"{key}.{opt_key}", f"not a plugin option{hint}")
            continue
        if not isinstance(value, bool):
            raise ConfigError(
                f"must be true or false, not {value!r}", key=f"{key}.{opt_key}", source=source
            )
        if opt_key == _HIERARCHY:
            hierarchy = value
        elif not value:
            disabled.update(POINT_FLAGS[opt_key])
    args = validate_args(cls.Args, raw.get("arguments"), f"{key}.arguments", warn)
    return PluginOption(
        name=name,
        args=args,
        disabled=switched_off(disabled),
        hierarchy=hierarchy,
        managed=cls.managed_resources(args),
        reads=cls.read_objects(args),
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
        known = registry.action_names()
        if name not in known:  # Volcano: "failed to find Action", and the file is refused
            raise ConfigError(
                f"unknown action {name!r}{did_you_mean(name, known)} (known: {', '.join(known)})",
                key="actions",
                source=source,
            )
        try:
            registry.action(name)
        except ConfigError as exc:
            raise ConfigError(str(exc), key="actions", source=source) from None
    return names


def _configurations(
    raw: Any, registry: Registry, warn: Warnings
) -> tuple[dict[str, Args], list[Mapping[str, Any]]]:
    """The actions' arguments by action name, and the entries plugins read."""
    source = warn.source
    if raw is None:
        return {}, []
    if not isinstance(raw, list):
        raise ConfigError(
            "must be a list of {name, arguments}", key="configurations", source=source
        )
    out: dict[str, Args] = {}
    kept: list[Mapping[str, Any]] = []
    known = registry.action_names()
    for i, item in enumerate(raw):
        key = f"configurations[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError("must be a map with 'name'", key=key, source=source)
        for extra in sorted(set(item) - {"name", "arguments"}, key=str):
            warn.add(f"{key}.{extra}", "not a configuration key (name, arguments)")
        name = item.get("name")
        if not isinstance(name, str):
            raise ConfigError("missing action name", key=f"{key}.name", source=source)
        if name in PLUGIN_CONFIGURATIONS:
            kept.append(item)
            continue
        if name not in known:  # Volcano looks configurations up by action name only
            warn.add(
                f"{key}.name",
                f"no action {name!r}{did_you_mean(name, known)}",
                then="its arguments are ignored",
            )
            continue
        try:
            cls = registry.action(name)
        except ConfigError as exc:
            raise ConfigError(str(exc), key=f"{key}.name", source=source) from None
        out[name] = validate_args(cls.Args, item.get("arguments"), f"{key}.arguments", warn)
    return out, kept


def load_policy(text: str, registry: Registry, *, source: str = "", strict: bool = False) -> Policy:
    """Parse and validate a policy; raises ConfigError naming the key at fault. What Volcano
    passes over is on :attr:`Policy.warnings`, or (``strict``) an error too."""
    warn = Warnings(source, strict=strict)
    raw = first_document(text, source)
    if not isinstance(raw, Mapping):
        raise ConfigError("the policy must be a YAML map", source=source)
    for key in raw:
        if key not in _TOP_KEYS:
            warn.add(str(key), f"not a policy key{did_you_mean(str(key), _TOP_KEYS)}")
    if "actions" not in raw:
        raise ConfigError(
            'missing (e.g. actions: "enqueue, allocate")', key="actions", source=source
        )
    action_names = _actions(raw["actions"], registry, source)
    configured, kept = _configurations(raw.get("configurations"), registry, warn)

    tiers_raw = raw.get("tiers") or []
    if not isinstance(tiers_raw, list):
        raise ConfigError("must be a list of {plugins: [...]}", key="tiers", source=source)
    tiers: list[tuple[PluginOption, ...]] = []
    seen: dict[str, str] = {}
    for t, tier in enumerate(tiers_raw):
        key = f"tiers[{t}]"
        if not isinstance(tier, Mapping):
            raise ConfigError("must be a map with 'plugins'", key=key, source=source)
        for extra in sorted(set(tier) - {"plugins"}, key=str):
            warn.add(f"{key}.{extra}", "not a tier key (plugins)")
        plugins = tier.get("plugins") or []
        if not isinstance(plugins, list):
            raise ConfigError("must be a list", key=f"{key}.plugins", source=source)
        options: list[PluginOption] = []
        for p, item in enumerate(plugins):
            pkey = f"{key}.plugins[{p}]"
            opt = _plugin_option(item, pkey, registry, warn)
            if opt is None:
                continue
            if opt.name in seen:
                if not registry.plugin(opt.name).repeatable:
                    raise ConfigError(
                        f"plugin {opt.name!r} already configured at {seen[opt.name]}",
                        key=f"{pkey}.name",
                        source=source,
                    )
                entries = sum(o.name == opt.name for tier in (*tiers, options) for o in tier)
                opt = replace(opt, key=f"{opt.name}#{entries + 1}")
            seen.setdefault(opt.name, pkey)
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
            args = validate_args(registry.action(name).Args, {}, "actions", warn)
        actions.append(ActionSpec(name=name, args=args))
    return Policy(
        actions=tuple(actions),
        tiers=tuple(tiers),
        metrics=dict(metrics),
        source=source,
        warnings=tuple(warn.found),
        configurations=tuple(kept),
    )


def load_policy_file(path: str | Path, registry: Registry, *, strict: bool = False) -> Policy:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read policy file: {exc.strerror}", source=str(p)) from None
    except UnicodeDecodeError:
        raise ConfigError("not a text file (not UTF-8)", source=str(p)) from None
    return load_policy(text, registry, source=str(p), strict=strict)


def default_policy(registry: Registry) -> Policy:
    return load_policy(DEFAULT_POLICY_YAML, registry, source="<built-in default>")
