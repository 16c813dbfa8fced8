"""The deprecated ``--scheduler-configs`` flag, read as Volcano reads it: the tables of
``pkg/controllers/sharding/config_test.go`` for ``ParseConfig``, ``parseOldFormat`` and
``NewShardingControllerOptions``, with ``parseSchedulerConfigsFromOptions``' chain."""

from __future__ import annotations

import math

import pytest

from caldera.sharding.assign_config import (
    SchedulerConfig,
    ShardingConfigError,
    parse_scheduler_flags,
)
from caldera.sharding.assign_decode import go_float


def chain(config: SchedulerConfig) -> list[tuple[str, int, dict[str, object]]]:
    return [(p.name, p.weight, dict(p.arguments)) for p in config.policies]


def test_new_sharding_controller_options_defaults() -> None:
    """``TestNewShardingControllerOptions_Defaults`` and ``TestParseConfigOldFormat``: the flag's
    defaults. The chain comes from ``parseOldFormat`` (allocation-rate), then
    ``applyPolicyDefaults`` adds node-limit; ``preferWarmup`` adds no warm-up link on this path."""
    volcano, agent = parse_scheduler_flags()
    assert (volcano.name, volcano.type) == ("volcano", "volcano")
    assert (volcano.cpu_utilization_min, volcano.cpu_utilization_max) == (0.0, 0.6)
    assert (volcano.min_nodes, volcano.max_nodes) == (2, 100)
    assert chain(volcano) == [
        ("allocation-rate", 1, {"minCPUUtil": 0.0, "maxCPUUtil": 0.6}),
        ("node-limit", 1, {"minNodes": 2, "maxNodes": 100}),
    ]
    assert (agent.name, agent.cpu_utilization_min, agent.prefer_warmup_nodes) == (
        "agent-scheduler",
        0.7,
        True,
    )
    assert [p.name for p in agent.policies] == ["allocation-rate", "node-limit"]


FLAG_ERRORS = [
    pytest.param(
        "volcano:volcano:allocation-rate:2:100:minCPUUtil=0.0,maxCPUUtil=0.6,preferWarmupNodes=false",
        "expected 7 colon-separated parts",
        id="TestParseConfigRejectsNewFormat",
    ),
    pytest.param(
        "volcano:volcano:0.0:0.6",
        "invalid scheduler config format: volcano:volcano:0.0:0.6, "
        "expected 7 colon-separated parts",
        id="TestParseConfigInvalidFormat: too few parts",
    ),
    pytest.param(
        "volcano:volcano:invalid:0.6:false:2:100",
        'invalid min utilization: strconv.ParseFloat: parsing "invalid": invalid syntax',
        id="TestParseConfigInvalidFormat: invalid min util",
    ),
    pytest.param(
        "volcano:volcano:0.0:invalid:false:2:100",
        "invalid max utilization",
        id="TestParseConfigInvalidFormat: invalid max util",
    ),
    pytest.param(
        "volcano:volcano:0.0:0.6:invalid:2:100",
        'invalid prefer warmup flag: strconv.ParseBool: parsing "invalid": invalid syntax',
        id="TestParseConfigInvalidFormat: invalid prefer warmup",
    ),
    pytest.param(
        "volcano:volcano:0.0:0.6:false:invalid:100",
        'invalid min nodes: strconv.Atoi: parsing "invalid": invalid syntax',
        id="TestParseConfigInvalidFormat: invalid min nodes",
    ),
    pytest.param(
        "volcano:volcano:0.0:0.6:false:2:invalid",
        "invalid max nodes",
        id="TestParseConfigInvalidFormat: invalid max nodes",
    ),
    pytest.param(
        "volcano:volcano:0.0:1.5:false:2:100",
        "invalid CPU utilization range [0.00, 1.50]",
        id="parseOldFormat: no range check, allocation-rate Initialize refuses",
    ),
]


@pytest.mark.parametrize(("entry", "message"), FLAG_ERRORS)
def test_parse_config_invalid_format(entry: str, message: str) -> None:
    with pytest.raises(ShardingConfigError) as caught:
        parse_scheduler_flags(["volcano:volcano:0.0:0.6:false:2:100", entry])
    assert caught.value.key == "--scheduler-configs[1]"
    assert message in str(caught.value)


def test_parse_utilization_reads_inf_as_the_bounds() -> None:
    """``parseUtilization``: ``inf`` is 1 and ``-inf`` is 0; other text is ``ParseFloat``'s."""
    (config,) = parse_scheduler_flags(["s:t:-inf:inf:t:0:0"])
    assert (config.cpu_utilization_min, config.cpu_utilization_max) == (0.0, 1.0)
    assert config.prefer_warmup_nodes
    assert [p.name for p in config.policies] == ["allocation-rate"]  # 0/0 nodes: no node-limit
    assert go_float("1e-1") == 0.1
    assert math.isnan(go_float("NaN"))
    with pytest.raises(ValueError, match="value out of range"):
        go_float("1e400")
    with pytest.raises(ValueError, match="invalid syntax"):
        go_float("1_0")
