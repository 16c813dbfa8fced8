"""The sharding controller's configuration: which schedulers split the nodes, and by which policies.

Volcano's sharding controller reads it from the ConfigMap ``volcano-sharding-configmap`` in
``volcano-system`` (key ``sharding.yaml``), or, without one, from its deprecated
``--scheduler-configs`` flag (``name:type:minUtil:maxUtil:preferWarmup:minNodes:maxNodes``). This
module turns either into frozen :class:`ShardingConfig` / :class:`SchedulerConfig` values as
``pkg/controllers/sharding/config.go`` and ``sharding_controller.go`` do:

- ``ParseShardingConfig`` decodes the YAML (the rules of :mod:`~caldera.sharding.assign_decode`)
  and validates it with Volcano's texts, ``validatePolicies`` included;
- ``applyPolicyDefaults`` turns the deprecated scheduler-level fields into a policy chain
  (``allocation-rate`` from ``arguments`` or ``cpuUtilizationMin``/``Max``, ``warmup`` for
  ``preferWarmupNodes``, ``node-limit`` for ``minNodes``/``maxNodes``), and ``toPolicyRefs``
  turns an omitted weight into 1;
- ``ParseConfig``/``parseOldFormat``/``parseSchedulerConfigsFromOptions`` read the flag.

Every policy is built here (``initializePolicies``), so an unknown policy name or arguments its
``Initialize`` refuses fail the configuration (Volcano logs them and runs a broken chain: see
:func:`parse_sharding_config`). A refused configuration raises
:class:`~caldera.sharding.assign_decode.ShardingConfigError` (a ValueError) whose ``key`` is the
path of the value at fault, e.g. ``schedulerConfigs[1].cpuUtilizationMax``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

from caldera.framework.duration import parse_go_duration
from caldera.sharding.assign_decode import (
    ShardingConfigError,
    go_bool,
    go_float,
    go_int,
    load_yaml,
    struct_fields,
    to_bool_ptr,
    to_float,
    to_int,
    to_list,
    to_map,
    to_string,
)
from caldera.sharding.assign_policies import (
    ALLOCATION_RATE,
    ARG_MAX_CPU_UTIL,
    ARG_MAX_NODES,
    ARG_MIN_CPU_UTIL,
    ARG_MIN_NODES,
    NODE_LIMIT,
    WARMUP,
    ShardPolicy,
    build_policy,
)

__all__ = [
    "CONFIGMAP_DATA_KEY",
    "DEFAULT_CONFIGMAP_NAME",
    "DEFAULT_CONFIGMAP_NAMESPACE",
    "DEFAULT_ENABLE_NODE_EVENT_TRIGGER",
    "DEFAULT_POLICY_NAME",
    "DEFAULT_SCHEDULER_CONFIGS",
    "DEFAULT_SHARD_SYNC_PERIOD",
    "FLAG_SHARD_SYNC_PERIOD",
    "PolicyRef",
    "SchedulerConfig",
    "ShardingConfig",
    "ShardingConfigError",
    "node_event_trigger",
    "parse_scheduler_flags",
    "parse_sharding_config",
    "parse_sharding_configmap",
    "shard_sync_period",
]

CONFIGMAP_DATA_KEY = "sharding.yaml"
DEFAULT_CONFIGMAP_NAME = "volcano-sharding-configmap"
DEFAULT_CONFIGMAP_NAMESPACE = "volcano-system"
"""``--sharding-configmap`` and ``--sharding-configmap-namespace``'s defaults."""
DEFAULT_POLICY_NAME = ALLOCATION_RATE
DEFAULT_SCHEDULER_CONFIGS = (
    "volcano:volcano:0.0:0.6:false:2:100",
    "agent-scheduler:agent:0.7:1.0:true:2:100",
)
"""``--scheduler-configs``' default."""
FLAG_SHARD_SYNC_PERIOD = 60.0
"""``--shard-sync-period``'s default, in seconds."""
DEFAULT_SHARD_SYNC_PERIOD = 120.0
"""``defaultShardSyncPeriod``: the period used when the configured one is not positive."""
DEFAULT_ENABLE_NODE_EVENT_TRIGGER = True
"""``--enable-node-event-trigger``'s default."""

_PREFIX = "failed to unmarshal sharding config"
_TOP_FIELDS = ("schedulerConfigs", "shardSyncPeriod", "enableNodeEventTrigger")
_SPEC_FIELDS = (
    "name",
    "type",
    "policies",
    "arguments",
    "cpuUtilizationMin",
    "cpuUtilizationMax",
    "preferWarmupNodes",
    "minNodes",
    "maxNodes",
)
_POLICY_FIELDS = ("name", "weight", "arguments")
_FLAG = "--scheduler-configs"
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class PolicyRef:
    """One link of a scheduler's policy chain (``PolicyRef``), built (``initializePolicies``)."""

    name: str
    weight: int
    """The Scorer's weight; an omitted (or 0) weight is 1 (``toPolicyRefs``)."""
    arguments: Mapping[str, object]
    policy: ShardPolicy


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """One scheduler's NodeShard spec (``SchedulerConfigSpec`` after ``applyPolicyDefaults``)."""

    name: str
    """The scheduler's name, and its NodeShard's."""
    type: str
    policies: tuple[PolicyRef, ...]
    """The effective chain, synthesized links included."""
    cpu_utilization_min: float = 0.0
    cpu_utilization_max: float = 0.0
    prefer_warmup_nodes: bool = False
    min_nodes: int = 0
    max_nodes: int = 0
    """The deprecated scheduler-level fields as written (informational once in the chain)."""


@dataclass(frozen=True, slots=True)
class ShardingConfig:
    """The ConfigMap's ``sharding.yaml`` (``ShardingConfig``)."""

    scheduler_configs: tuple[SchedulerConfig, ...]
    shard_sync_period: str = ""
    """As written (see :func:`shard_sync_period`)."""
    enable_node_event_trigger: bool | None = None
    """None when not written (see :func:`node_event_trigger`)."""


@dataclass(slots=True)
class _PolicySpec:
    name: str
    weight: int
    arguments: dict[str, object]
    key: str
    """The path of this entry's ``arguments`` (for a refusal by its policy's ``Initialize``)."""


@dataclass(slots=True)
class _Spec:
    """``SchedulerConfigSpec`` as decoded, before ``applyPolicyDefaults``."""

    name: str
    type: str = ""
    policies: list[_PolicySpec] | None = None
    arguments: dict[str, object] | None = None
    cpu_min: float = 0.0
    cpu_max: float = 0.0
    prefer_warmup: bool = False
    min_nodes: int = 0
    max_nodes: int = 0


def parse_sharding_configmap(data: Mapping[str, str]) -> ShardingConfig | None:
    """``reloadFromConfigMap``: the configuration in a ConfigMap's ``data``; None when it has no
    ``sharding.yaml`` (Volcano then keeps the configuration it has)."""
    text = data.get(CONFIGMAP_DATA_KEY)
    return None if text is None else parse_sharding_config(text)


def parse_sharding_config(text: str | bytes) -> ShardingConfig:
    """``ParseShardingConfig`` then ``applyShardingConfig``'s ``applyPolicyDefaults`` and
    ``schedulerConfigFromSpec``, and every policy built as ``initializePolicies`` does.

    Refused (ShardingConfigError) where Volcano refuses the ConfigMap, with its texts. Also
    refused: an unknown policy name or policy arguments the policy's ``Initialize`` rejects (an
    ``allocation-rate`` range outside [0, 1], an empty ``warmupLabel``, ``node-limit`` bounds
    out of order), which Volcano accepts and then runs without any policy for that scheduler and
    every later one (``NewShardingManager`` stops at the first failure), handing them every node
    left. The user guide lists those as validation rules; here they are."""
    doc = load_yaml(text, CONFIGMAP_DATA_KEY, _PREFIX)
    top = struct_fields(doc, _TOP_FIELDS, CONFIGMAP_DATA_KEY, _PREFIX, "sharding.ShardingConfig")
    entries = to_list(
        top.get("schedulerConfigs"), "schedulerConfigs", _PREFIX, "[]sharding.SchedulerConfigSpec"
    )
    specs = [_decode_spec(entry, f"schedulerConfigs[{i}]") for i, entry in enumerate(entries)]
    period = to_string(top.get("shardSyncPeriod"), "shardSyncPeriod", _PREFIX)
    trigger = to_bool_ptr(top.get("enableNodeEventTrigger"), "enableNodeEventTrigger", _PREFIX)
    if not specs:
        raise ShardingConfigError(
            "schedulerConfigs",
            "sharding config must contain at least one schedulerConfig entry",
        )
    for i, spec in enumerate(specs):
        _validate(i, spec)
    configs = tuple(_build(i, spec, legacy_warmup=True) for i, spec in enumerate(specs))
    return ShardingConfig(configs, period, trigger)


def _decode_spec(entry: object, key: str) -> _Spec:
    fields = struct_fields(entry, _SPEC_FIELDS, key, _PREFIX, "sharding.SchedulerConfigSpec")
    raw_policies = fields.get("policies")
    policies = None
    if raw_policies is not None:
        items = to_list(raw_policies, f"{key}.policies", _PREFIX, "[]sharding.PolicySpec")
        policies = [_decode_policy(p, f"{key}.policies[{j}]") for j, p in enumerate(items)]
    raw_args = fields.get("arguments")
    return _Spec(
        name=to_string(fields.get("name"), f"{key}.name", _PREFIX),
        type=to_string(fields.get("type"), f"{key}.type", _PREFIX),
        policies=policies,
        arguments=None if raw_args is None else to_map(raw_args, f"{key}.arguments", _PREFIX),
        cpu_min=to_float(fields.get("cpuUtilizationMin"), f"{key}.cpuUtilizationMin", _PREFIX),
        cpu_max=to_float(fields.get("cpuUtilizationMax"), f"{key}.cpuUtilizationMax", _PREFIX),
        prefer_warmup=bool(
            to_bool_ptr(fields.get("preferWarmupNodes"), f"{key}.preferWarmupNodes", _PREFIX)
        ),
        min_nodes=to_int(fields.get("minNodes"), f"{key}.minNodes", _PREFIX),
        max_nodes=to_int(fields.get("maxNodes"), f"{key}.maxNodes", _PREFIX),
    )


def _decode_policy(entry: object, key: str) -> _PolicySpec:
    fields = struct_fields(entry, _POLICY_FIELDS, key, _PREFIX, "sharding.PolicySpec")
    return _PolicySpec(
        name=to_string(fields.get("name"), f"{key}.name", _PREFIX),
        weight=to_int(fields.get("weight"), f"{key}.weight", _PREFIX),
        arguments=to_map(fields.get("arguments"), f"{key}.arguments", _PREFIX),
        key=f"{key}.arguments",
    )


def _validate(i: int, spec: _Spec) -> None:
    """``ParseShardingConfig``'s checks of one entry, in its order, with its texts."""
    key = f"schedulerConfigs[{i}]"
    at = f"{key} ({spec.name})"
    if spec.name == "":
        raise ShardingConfigError(f"{key}.name", f"{key}: name must not be empty")
    for field, value in (("cpuUtilizationMin", spec.cpu_min), ("cpuUtilizationMax", spec.cpu_max)):
        if value < 0 or value > 1:
            raise ShardingConfigError(
                f"{key}.{field}", f"{at}: {field} {value:.2f} out of range [0,1]"
            )
    if spec.cpu_min > spec.cpu_max:
        raise ShardingConfigError(
            f"{key}.cpuUtilizationMin",
            f"{at}: cpuUtilizationMin ({spec.cpu_min:.2f}) must be <= "
            f"cpuUtilizationMax ({spec.cpu_max:.2f})",
        )
    if spec.min_nodes < 0:
        raise ShardingConfigError(f"{key}.minNodes", f"{at}: minNodes must be >= 0")
    if spec.max_nodes < spec.min_nodes:
        raise ShardingConfigError(
            f"{key}.maxNodes",
            f"{at}: maxNodes ({spec.max_nodes}) must be >= minNodes ({spec.min_nodes})",
        )
    _validate_policies(i, spec)


def _validate_policies(i: int, spec: _Spec) -> None:
    """``validatePolicies``: names present, weights not negative, and ``minNodes``/``maxNodes``
    arguments only on ``node-limit``."""
    at = f"schedulerConfigs[{i}] ({spec.name})"
    for j, policy in enumerate(spec.policies or ()):
        key = f"schedulerConfigs[{i}].policies[{j}]"
        if policy.name == "":
            raise ShardingConfigError(f"{key}.name", f"{at}: policies[{j}].name must not be empty")
        if policy.weight < 0:
            raise ShardingConfigError(
                f"{key}.weight",
                f"{at}: policies[{j}] ({policy.name}): weight must be >= 0 (omit for default of 1)",
            )
        if policy.name == NODE_LIMIT:
            continue
        for arg in (ARG_MIN_NODES, ARG_MAX_NODES):
            if arg in policy.arguments:
                raise ShardingConfigError(
                    f"{key}.arguments.{arg}",
                    f"{at}: policies[{j}] ({policy.name}): {arg} is only supported by the "
                    "node-limit policy",
                )


def _apply_policy_defaults(spec: _Spec, key: str, *, legacy_warmup: bool) -> list[_PolicySpec]:
    """``applyPolicyDefaults``: the chain, with the deprecated fields' links added."""
    policies = list(spec.policies or ())
    if not policies:
        arguments = spec.arguments
        arguments_key = f"{key}.arguments"
        if not arguments:
            arguments = {ARG_MIN_CPU_UTIL: spec.cpu_min, ARG_MAX_CPU_UTIL: spec.cpu_max}
            arguments_key = f"{key}.cpuUtilizationMin"
        policies.append(_PolicySpec(DEFAULT_POLICY_NAME, 1, arguments, arguments_key))
        if spec.prefer_warmup and legacy_warmup:
            policies.append(_PolicySpec(WARMUP, 1, {}, f"{key}.preferWarmupNodes"))
    if (spec.min_nodes > 0 or spec.max_nodes > 0) and all(p.name != NODE_LIMIT for p in policies):
        limits: dict[str, object] = {ARG_MIN_NODES: spec.min_nodes, ARG_MAX_NODES: spec.max_nodes}
        policies.append(_PolicySpec(NODE_LIMIT, 0, limits, f"{key}.maxNodes"))
    return policies


def _build(i: int, spec: _Spec, *, legacy_warmup: bool) -> SchedulerConfig:
    """``schedulerConfigFromSpec`` (``toPolicyRefs``) with each policy built
    (``initializePolicies``)."""
    key = f"schedulerConfigs[{i}]"
    refs = []
    for j, link in enumerate(_apply_policy_defaults(spec, key, legacy_warmup=legacy_warmup)):
        try:
            policy = build_policy(link.name, link.arguments)
        except ValueError as err:
            name_key = f"{key}.policies[{j}].name"
            raise ShardingConfigError(
                name_key if str(err).endswith("not found") else link.key,
                f"{key} ({spec.name}): policies[{j}] ({link.name}): {err}",
            ) from None
        arguments = MappingProxyType(dict(link.arguments))
        refs.append(PolicyRef(link.name, link.weight or 1, arguments, policy))
    return SchedulerConfig(
        name=spec.name,
        type=spec.type,
        policies=tuple(refs),
        cpu_utilization_min=spec.cpu_min,
        cpu_utilization_max=spec.cpu_max,
        prefer_warmup_nodes=spec.prefer_warmup,
        min_nodes=spec.min_nodes,
        max_nodes=spec.max_nodes,
    )


def parse_scheduler_flags(
    raw: Sequence[str] = DEFAULT_SCHEDULER_CONFIGS,
) -> tuple[SchedulerConfig, ...]:
    """``ParseConfig`` and ``parseSchedulerConfigsFromOptions``: the deprecated
    ``--scheduler-configs`` entries (``name:type:minUtil:maxUtil:preferWarmup:minNodes:maxNodes``).

    As in Volcano, an entry's ``preferWarmup`` adds no ``warmup`` link here (``parseOldFormat``
    already fills the chain, so ``applyPolicyDefaults`` leaves it alone), the utilisations are not
    range-checked before ``allocation-rate`` refuses them, and ``inf``/``-inf`` read as 1/0.
    ShardingConfigError keyed ``--scheduler-configs[i]`` with Volcano's texts."""
    specs = []
    for i, entry in enumerate(raw):
        parts = entry.split(":")
        if len(parts) != 7:
            raise ShardingConfigError(
                f"{_FLAG}[{i}]",
                f"invalid scheduler config format: {entry}, expected 7 colon-separated parts",
            )
        try:
            specs.append(_parse_old_format(parts))
        except ValueError as err:
            raise ShardingConfigError(
                f"{_FLAG}[{i}]", f"failed to parse scheduler config {entry}: {err}"
            ) from None
    built = []
    for i, spec in enumerate(specs):
        try:
            built.append(_build(i, spec, legacy_warmup=False))
        except ShardingConfigError as err:
            raise ShardingConfigError(f"{_FLAG}[{i}]", str(err)) from None
    return tuple(built)


def _parse_utilization(text: str) -> float:
    """``parseUtilization``."""
    if text in ("inf", "infinity"):
        return 1.0
    if text in ("-inf", "-infinity"):
        return 0.0
    return go_float(text)


def _field(label: str, text: str, parse: Callable[[str], _T]) -> _T:
    try:
        return parse(text)
    except ValueError as err:
        raise ValueError(f"invalid {label}: {err}") from None


def _parse_old_format(parts: list[str]) -> _Spec:
    """``parseOldFormat``: the chain is ``allocation-rate`` over the two utilisations."""
    low = _field("min utilization", parts[2], _parse_utilization)
    high = _field("max utilization", parts[3], _parse_utilization)
    prefer_warmup = _field("prefer warmup flag", parts[4], go_bool)
    min_nodes = _field("min nodes", parts[5], go_int)
    max_nodes = _field("max nodes", parts[6], go_int)
    arguments: dict[str, object] = {ARG_MIN_CPU_UTIL: low, ARG_MAX_CPU_UTIL: high}
    return _Spec(
        name=parts[0],
        type=parts[1],
        policies=[_PolicySpec(DEFAULT_POLICY_NAME, 1, arguments, f"{_FLAG}.arguments")],
        arguments=dict(arguments),
        cpu_min=low,
        cpu_max=high,
        prefer_warmup=prefer_warmup,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
    )


def shard_sync_period(config: ShardingConfig, current: float) -> float:
    """``applyShardingConfig`` and ``getShardSyncPeriod``: the sync period in seconds once
    ``config`` is applied over ``current``. An empty or unparsable ``shardSyncPeriod`` keeps
    ``current`` (Volcano logs a warning); a period that is not positive means 120 s."""
    period = current
    if config.shard_sync_period:
        try:
            period = parse_go_duration(config.shard_sync_period)
        except ValueError:
            period = current
    return period if period > 0 else DEFAULT_SHARD_SYNC_PERIOD


def node_event_trigger(config: ShardingConfig, current: bool) -> bool:
    """``applyShardingConfig``: ``enableNodeEventTrigger`` when written, else ``current``."""
    trigger = config.enable_node_event_trigger
    return current if trigger is None else trigger
