"""The sharding controller's configuration, read as Volcano reads it: the tables of
``pkg/controllers/sharding/config_test.go`` (``ParseShardingConfig``, ``ParseConfig``,
``parseOldFormat``), ``sharding_manager_pipeline_test.go`` (``applyPolicyDefaults``),
``sharding_function_test.go`` (``TestSchedulerConfigParsing``) and
``configmap_reload_test.go``, plus the decoding rules of ``sigs.k8s.io/yaml`` they rest on."""

from __future__ import annotations

import pytest

from caldera.sharding.assign_config import (
    CONFIGMAP_DATA_KEY,
    DEFAULT_CONFIGMAP_NAME,
    DEFAULT_CONFIGMAP_NAMESPACE,
    DEFAULT_SHARD_SYNC_PERIOD,
    SchedulerConfig,
    ShardingConfigError,
    node_event_trigger,
    parse_sharding_config,
    parse_sharding_configmap,
    shard_sync_period,
)
from caldera.sharding.assign_policies import AllocationRate, NodeLimit, Warmup

VALID = """
schedulerConfigs:
  - name: agent-scheduler
    type: agent
    cpuUtilizationMin: 0.7
    cpuUtilizationMax: 1.0
    preferWarmupNodes: true
    minNodes: 1
    maxNodes: 100
  - name: volcano
    type: volcano
    cpuUtilizationMin: 0.0
    cpuUtilizationMax: 0.69
    preferWarmupNodes: false
    minNodes: 1
    maxNodes: 100
shardSyncPeriod: "60s"
enableNodeEventTrigger: true
"""


def chain(config: SchedulerConfig) -> list[tuple[str, int, dict[str, object]]]:
    return [(p.name, p.weight, dict(p.arguments)) for p in config.policies]


def one(entry: str) -> str:
    """A configuration of one scheduler entry (a YAML flow mapping)."""
    return f"schedulerConfigs:\n  - {entry}\n"


def test_parse_sharding_config_valid() -> None:
    """``TestParseShardingConfig_Valid``, and the chain ``applyShardingConfig`` derives."""
    cfg = parse_sharding_config(VALID)
    agent, volcano = cfg.scheduler_configs
    assert (agent.name, agent.type) == ("agent-scheduler", "agent")
    assert (agent.cpu_utilization_min, agent.cpu_utilization_max) == (0.7, 1.0)
    assert agent.prefer_warmup_nodes
    assert (agent.min_nodes, agent.max_nodes) == (1, 100)
    assert (volcano.name, volcano.cpu_utilization_max, volcano.prefer_warmup_nodes) == (
        "volcano",
        0.69,
        False,
    )
    assert cfg.shard_sync_period == "60s"
    assert cfg.enable_node_event_trigger is True
    assert chain(agent) == [
        ("allocation-rate", 1, {"minCPUUtil": 0.7, "maxCPUUtil": 1.0}),
        ("warmup", 1, {}),
        ("node-limit", 1, {"minNodes": 1, "maxNodes": 100}),
    ]
    assert [type(p.policy) for p in agent.policies] == [AllocationRate, Warmup, NodeLimit]
    assert agent.policies[2].policy == NodeLimit(1, 100)
    assert chain(volcano)[0] == ("allocation-rate", 1, {"minCPUUtil": 0.0, "maxCPUUtil": 0.69})
    assert [p.name for p in volcano.policies] == ["allocation-rate", "node-limit"]


def test_parse_sharding_config_optional_fields() -> None:
    """``TestParseShardingConfig_OptionalFields``: no period, no trigger."""
    cfg = parse_sharding_config(
        one(
            "{name: my-scheduler, type: volcano, cpuUtilizationMax: 0.80,"
            " minNodes: 2, maxNodes: 50}"
        )
    )
    assert cfg.shard_sync_period == ""
    assert cfg.enable_node_event_trigger is None


REFUSED = [
    pytest.param(
        "schedulerConfigs: []",
        "schedulerConfigs",
        "sharding config must contain at least one schedulerConfig entry",
        id="TestParseShardingConfig_EmptySchedulerList",
    ),
    pytest.param(
        "", "schedulerConfigs", "at least one schedulerConfig", id="empty document: no entries"
    ),
    pytest.param(
        one("{type: agent, cpuUtilizationMin: 0.5, cpuUtilizationMax: 1.0, maxNodes: 10}"),
        "schedulerConfigs[0].name",
        "schedulerConfigs[0]: name must not be empty",
        id="TestParseShardingConfig_MissingName",
    ),
    pytest.param(
        one("{name: bad, cpuUtilizationMin: -0.1, cpuUtilizationMax: 0.9}"),
        "schedulerConfigs[0].cpuUtilizationMin",
        "schedulerConfigs[0] (bad): cpuUtilizationMin -0.10 out of range [0,1]",
        id="TestParseShardingConfig_CPUMinOutOfRange",
    ),
    pytest.param(
        one("{name: bad, cpuUtilizationMin: 0.0, cpuUtilizationMax: 1.1}"),
        "schedulerConfigs[0].cpuUtilizationMax",
        "schedulerConfigs[0] (bad): cpuUtilizationMax 1.10 out of range [0,1]",
        id="TestParseShardingConfig_CPUMaxOutOfRange",
    ),
    pytest.param(
        one("{name: bad, cpuUtilizationMin: 0.9, cpuUtilizationMax: 0.5}"),
        "schedulerConfigs[0].cpuUtilizationMin",
        "schedulerConfigs[0] (bad): cpuUtilizationMin (0.90) must be <= cpuUtilizationMax (0.50)",
        id="TestParseShardingConfig_MinGreaterThanMax",
    ),
    pytest.param(
        one("{name: bad, cpuUtilizationMax: 0.9, minNodes: 10, maxNodes: 5}"),
        "schedulerConfigs[0].maxNodes",
        "schedulerConfigs[0] (bad): maxNodes (5) must be >= minNodes (10)",
        id="TestParseShardingConfig_MaxNodesLessThanMinNodes",
    ),
    pytest.param(
        one("{name: bad, minNodes: 3}"),
        "schedulerConfigs[0].maxNodes",
        "schedulerConfigs[0] (bad): maxNodes (0) must be >= minNodes (3)",
        id="ParseShardingConfig: an omitted maxNodes is 0, below minNodes",
    ),
    pytest.param(
        one("{name: bad, minNodes: -1, maxNodes: 5}"),
        "schedulerConfigs[0].minNodes",
        "schedulerConfigs[0] (bad): minNodes must be >= 0",
        id="ParseShardingConfig: negative minNodes",
    ),
    pytest.param(
        "{invalid yaml{{",
        CONFIGMAP_DATA_KEY,
        "failed to unmarshal sharding config: ",
        id="TestParseShardingConfig_InvalidYAML",
    ),
    pytest.param(
        "schedulerConfigs:\n  - name: a\n    cpuUtilizationMax: high\n",
        "schedulerConfigs[0].cpuUtilizationMax",
        "failed to unmarshal sharding config: schedulerConfigs[0].cpuUtilizationMax: "
        "cannot unmarshal string into Go value of type float64",
        id="ParseShardingConfig: a string for a float field",
    ),
    pytest.param(
        one("{name: a, maxNodes: 2.5}"),
        "schedulerConfigs[0].maxNodes",
        "cannot unmarshal number 2.5 into Go int",
        id="ParseShardingConfig: a fraction for an int field",
    ),
    pytest.param(
        one("{name: a, preferWarmupNodes: maybe}"),
        "schedulerConfigs[0].preferWarmupNodes",
        "cannot unmarshal string into Go value of type bool",
        id="ParseShardingConfig: a string for a bool field",
    ),
    pytest.param(
        "schedulerConfigs: {name: a}",
        "schedulerConfigs",
        "cannot unmarshal object into Go value of type []sharding.SchedulerConfigSpec",
        id="ParseShardingConfig: schedulerConfigs not a list",
    ),
    pytest.param(
        one("{name: a, cpuUtilizationMax: .inf}"),
        CONFIGMAP_DATA_KEY,
        "json: unsupported value: +Inf",
        id="ParseShardingConfig: a float that is not finite fails json.Marshal",
    ),
    pytest.param(
        one("{name: a, policies: [{weight: 1}]}"),
        "schedulerConfigs[0].policies[0].name",
        "schedulerConfigs[0] (a): policies[0].name must not be empty",
        id="validatePolicies: empty policy name",
    ),
    pytest.param(
        one("{name: a, policies: [{name: warmup, weight: -1}]}"),
        "schedulerConfigs[0].policies[0].weight",
        "schedulerConfigs[0] (a): policies[0] (warmup): weight must be >= 0 "
        "(omit for default of 1)",
        id="validatePolicies: negative weight",
    ),
    pytest.param(
        one("{name: a, policies: [{name: allocation-rate, arguments: {minNodes: 1}}]}"),
        "schedulerConfigs[0].policies[0].arguments.minNodes",
        "schedulerConfigs[0] (a): policies[0] (allocation-rate): minNodes is only supported by "
        "the node-limit policy",
        id="validatePolicies: minNodes outside node-limit",
    ),
    pytest.param(
        one("{name: a, policies: [{name: warmup, arguments: {maxNodes: 1}}]}"),
        "schedulerConfigs[0].policies[0].arguments.maxNodes",
        "maxNodes is only supported by the node-limit policy",
        id="validatePolicies: maxNodes outside node-limit",
    ),
    pytest.param(
        one("{name: a, policies: [{name: capability}]}"),
        "schedulerConfigs[0].policies[0].name",
        "schedulerConfigs[0] (a): policies[0] (capability): policy capability not found",
        id="initializePolicies: unknown policy (GetPolicy)",
    ),
    pytest.param(
        one(
            "{name: a, policies: [{name: allocation-rate, "
            "arguments: {minCPUUtil: 0.7, maxCPUUtil: 0.5}}]}"
        ),
        "schedulerConfigs[0].policies[0].arguments",
        "policies[0] (allocation-rate): invalid CPU utilization range [0.70, 0.50]: must be "
        "within [0.0, 1.0] and min <= max",
        id="initializePolicies: allocation-rate Initialize refuses min > max",
    ),
    pytest.param(
        one("{name: a, policies: [{name: warmup, arguments: {warmupLabel: ''}}]}"),
        "schedulerConfigs[0].policies[0].arguments",
        "warmupLabel cannot be empty",
        id="initializePolicies: warmup Initialize refuses an empty label",
    ),
    pytest.param(
        one("{name: a, policies: [{name: node-limit, arguments: {minNodes: 10, maxNodes: 5}}]}"),
        "schedulerConfigs[0].policies[0].arguments",
        "invalid bounds [10, 5]: maxNodes must be >= minNodes",
        id="initializePolicies: node-limit Initialize refuses max < min",
    ),
    pytest.param(
        one("{name: a, arguments: {minCPUUtil: 0.5, maxCPUUtil: 2}}"),
        "schedulerConfigs[0].arguments",
        "invalid CPU utilization range [0.50, 2.00]",
        id="initializePolicies: legacy arguments refused by allocation-rate",
    ),
]


@pytest.mark.parametrize(("text", "key", "message"), REFUSED)
def test_refused_configurations_name_the_key_at_fault(text: str, key: str, message: str) -> None:
    with pytest.raises(ShardingConfigError) as caught:
        parse_sharding_config(text)
    assert isinstance(caught.value, ValueError)
    assert caught.value.key == key
    assert message in str(caught.value)


SYNTHESIS = [
    pytest.param(
        "{name: a, policies: [{name: allocation-rate, weight: 1}]}",
        [("allocation-rate", 1, {})],
        id="TestApplyPolicyDefaultsSynthesisLegacy: explicit Policies untouched",
    ),
    pytest.param(
        "{name: a, cpuUtilizationMin: 0.2, cpuUtilizationMax: 0.7}",
        [("allocation-rate", 1, {"minCPUUtil": 0.2, "maxCPUUtil": 0.7})],
        id="TestApplyPolicyDefaultsSynthesisLegacy: empty Policies, default policy synthesized",
    ),
    pytest.param(
        "{name: a, arguments: {minCPUUtil: 0.0, maxCPUUtil: 1.0}, preferWarmupNodes: true}",
        [("allocation-rate", 1, {"minCPUUtil": 0.0, "maxCPUUtil": 1.0}), ("warmup", 1, {})],
        id="TestApplyPolicyDefaultsSynthesisLegacy: preferWarmupNodes appends warmup entry",
    ),
    pytest.param(
        "{name: a, minNodes: 1, maxNodes: 2, policies: [{name: allocation-rate, "
        "arguments: {minCPUUtil: 0.0, maxCPUUtil: 1.0}}]}",
        [
            ("allocation-rate", 1, {"minCPUUtil": 0.0, "maxCPUUtil": 1.0}),
            ("node-limit", 1, {"minNodes": 1, "maxNodes": 2}),
        ],
        id="TestPipelineNodeLimitSynthesizedFromScalars",
    ),
    pytest.param(
        "{name: a, maxNodes: 9, policies: [{name: warmup, weight: 3}, "
        "{name: node-limit, arguments: {maxNodes: 4}}]}",
        [("warmup", 3, {}), ("node-limit", 1, {"maxNodes": 4})],
        id="applyPolicyDefaults: an explicit node-limit wins over the scalars",
    ),
    pytest.param(
        "{name: a, preferWarmupNodes: true, policies: [{name: allocation-rate}]}",
        [("allocation-rate", 1, {})],
        id="applyPolicyDefaults: preferWarmupNodes ignored beside explicit policies",
    ),
    pytest.param(
        "{name: a, policies: [{name: warmup, weight: 0}]}",
        [("warmup", 1, {})],
        id="toPolicyRefs: weight 0 is the default 1",
    ),
]


@pytest.mark.parametrize(("entry", "expected"), SYNTHESIS)
def test_policy_chain_synthesis(
    entry: str, expected: list[tuple[str, int, dict[str, object]]]
) -> None:
    (config,) = parse_sharding_config(one(entry)).scheduler_configs
    assert chain(config) == expected


def test_scheduler_config_parsing() -> None:
    """``TestSchedulerConfigParsing``: legacy fields through the ConfigMap give
    allocation-rate + warmup + node-limit, and allocation-rate + node-limit without warm-up."""
    cfg = parse_sharding_config(
        "schedulerConfigs:\n"
        "  - {name: custom-agent, type: agent, cpuUtilizationMin: 0.8, cpuUtilizationMax: 1.0,"
        " preferWarmupNodes: true, minNodes: 2, maxNodes: 5}\n"
        "  - {name: custom-volcano, type: volcano, cpuUtilizationMin: 0.0,"
        " cpuUtilizationMax: 0.4, preferWarmupNodes: false, minNodes: 1, maxNodes: 10}\n"
    )
    agent, volcano = cfg.scheduler_configs
    assert (agent.min_nodes, agent.max_nodes) == (2, 5)
    assert [p.name for p in agent.policies] == ["allocation-rate", "warmup", "node-limit"]
    assert agent.policies[0].policy == AllocationRate(0.8, 1.0)
    assert [p.name for p in volcano.policies] == ["allocation-rate", "node-limit"]
    assert volcano.policies[0].policy == AllocationRate(0.0, 0.4)
    assert volcano.policies[1].policy == NodeLimit(1, 10)


DECODING = [
    pytest.param(
        "SchedulerConfigs:\n  - {NAME: a, CpuUtilizationMax: 0.5}\n",
        ("a", 0.5),
        id="sigs.k8s.io/yaml: keys match fields ignoring case",
    ),
    pytest.param(
        "schedulerConfigs:\n  - {name: 7, cpuUtilizationMax: 1}\n",
        ("7", 1.0),
        id="yamlToJSONTarget: a number for a string field becomes its text",
    ),
    pytest.param(
        "schedulerConfigs:\n  - {name: 1.5}\n",
        ("1.5", 0.0),
        id="yamlToJSONTarget: a float for a string field, FormatFloat 32",
    ),
    pytest.param(
        "schedulerConfigs:\n  - {name: yes}\n",
        ("true", 0.0),
        id="yaml.v2: yes is a boolean, written true in a string field",
    ),
    pytest.param(
        "schedulerConfigs:\n  - {name: a, unknown: 1, cpuUtilizationMax: null}\n",
        ("a", 0.0),
        id="encoding/json: unknown keys ignored, null leaves the zero value",
    ),
    pytest.param(
        "schedulerConfigs:\n  - {name: 2020-01-01}\n",
        ("2020-01-01", 0.0),
        id="yaml.v2: a date stays a string",
    ),
]


@pytest.mark.parametrize(("text", "expected"), DECODING)
def test_decoding_follows_sigs_k8s_io_yaml(text: str, expected: tuple[str, float]) -> None:
    (config,) = parse_sharding_config(text).scheduler_configs
    assert (config.name, config.cpu_utilization_max) == expected


def test_the_design_documents_kebab_case_keys_are_not_read() -> None:
    """docs/design/sharding_controller.md's example (``scheduler-configs``,
    ``cpu-utilization-min``) does not match the Go struct tags: no entry is read."""
    with pytest.raises(ShardingConfigError, match="at least one schedulerConfig"):
        parse_sharding_config("scheduler-configs:\n  - name: a\n    cpu-utilization-min: 0.7\n")


def test_the_example_configmap_parses() -> None:
    """``example/sharding/sharding-config-configmap.yaml``'s data, through
    ``reloadFromConfigMap``; a ConfigMap without ``sharding.yaml`` is skipped
    (``TestReloadFromConfigMap_MissingKeySkipsReload``)."""
    cfg = parse_sharding_configmap({CONFIGMAP_DATA_KEY: VALID})
    assert cfg is not None
    assert [c.name for c in cfg.scheduler_configs] == ["agent-scheduler", "volcano"]
    assert parse_sharding_configmap({"wrong-key.yaml": "schedulerConfigs: []"}) is None
    assert (DEFAULT_CONFIGMAP_NAME, DEFAULT_CONFIGMAP_NAMESPACE) == (
        "volcano-sharding-configmap",
        "volcano-system",
    )


@pytest.mark.parametrize(
    ("written", "current", "expected"),
    [
        pytest.param("30s", 60.0, 30.0, id="TestReloadFromConfigMap_UpdatesShardSyncPeriod"),
        pytest.param("", 45.0, 45.0, id="applyShardingConfig: empty keeps the period"),
        pytest.param("soon", 45.0, 45.0, id="applyShardingConfig: unparsable keeps the period"),
        pytest.param("1m30s", 60.0, 90.0, id="time.ParseDuration: parts add up"),
        pytest.param("0s", 60.0, DEFAULT_SHARD_SYNC_PERIOD, id="getShardSyncPeriod: 0 is 120s"),
        pytest.param("-5m", 60.0, DEFAULT_SHARD_SYNC_PERIOD, id="getShardSyncPeriod: negative"),
    ],
)
def test_shard_sync_period(written: str, current: float, expected: float) -> None:
    cfg = parse_sharding_config(one("{name: a}") + f"shardSyncPeriod: '{written}'\n")
    assert shard_sync_period(cfg, current) == expected


@pytest.mark.parametrize(
    ("written", "period"),
    [("1.5h", 5400.0), ("250ms", 0.25), ("60", 30.0), ("1d", 30.0)],
    ids=["hours", "milliseconds", "no unit: kept", "an unknown unit: kept"],
)
def test_the_sync_period_reads_a_go_duration(written: str, period: float) -> None:
    """``getShardSyncPeriod``: ``time.ParseDuration``; one it refuses keeps the current."""
    config = parse_sharding_config(one("{name: a}") + f'shardSyncPeriod: "{written}"\n')
    assert shard_sync_period(config, 30.0) == period


def test_enable_node_event_trigger() -> None:
    """``TestReloadFromConfigMap_UpdatesEnableNodeEventTrigger``: written false turns it off;
    not written keeps the current value."""
    off = parse_sharding_config(one("{name: a}") + "enableNodeEventTrigger: false\n")
    unset = parse_sharding_config(one("{name: a}"))
    assert node_event_trigger(off, True) is False
    assert node_event_trigger(unset, True) is True
    assert node_event_trigger(unset, False) is False
