"""Loading a policy (Volcano's ``volcano-scheduler.conf`` format): every mistake is a ConfigError
that names the key at fault; the shipped policy files load; the CLI exits 2 on a bad policy."""

from __future__ import annotations

from pathlib import Path

import pytest

import builders
from caldera.cli import main
from caldera.errors import ConfigError
from caldera.framework.policy import (
    DEFAULT_POLICY_YAML,
    Policy,
    default_policy,
    load_policy,
    load_policy_file,
)

REGISTRY = builders.REGISTRY
POLICIES = Path(__file__).resolve().parents[2] / "policies"


def load(text: str) -> Policy:
    return load_policy(text, REGISTRY)


def one_plugin(plugin_yaml: str) -> str:
    """A policy whose second tier holds gang and then the given plugin entry."""
    return f"""\
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
- plugins:
  - name: gang
{plugin_yaml}"""


# -- the built-in default -------------------------------------------------------------------------


def test_the_built_in_default_is_volcanos_default_scheduler_conf() -> None:
    policy = default_policy(REGISTRY)
    assert [a.name for a in policy.actions] == ["enqueue", "allocate", "backfill"]
    assert policy.layout == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
    ]
    assert all(not opt.disabled and not opt.hierarchy for tier in policy.tiers for opt in tier)
    assert policy.source == "<built-in default>"


# -- error paths: each names its key --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "says"),
    [
        pytest.param("- actions\n- tiers\n", "", "must be a YAML map", id="a list at top level"),
        pytest.param("just words\n", "", "must be a YAML map", id="a scalar at top level"),
        pytest.param("", "", "must be a YAML map", id="an empty file"),
        pytest.param(
            "tiers:\n- plugins:\n  - name: gang\n", "actions", "missing", id="actions is missing"
        ),
        pytest.param(
            "actions:\n- enqueue\n- allocate\n",
            "actions",
            "comma-separated string",
            id="actions as a YAML list instead of a string",
        ),
        pytest.param('actions: " "\n', "actions", "names no action", id="actions names nothing"),
        pytest.param(
            'actions: "enqueue,, allocate"\n',
            "actions",
            "empty action name at position 2",
            id="an empty name between commas",
        ),
        pytest.param(
            'actions: "enqueue, allocate,"\n',
            "actions",
            "empty action name at position 3",
            id="a trailing comma",
        ),
        pytest.param(
            'actions: "enqueue, allocate, preemptpf"\n',
            "actions",
            "unknown action 'preemptpf' (did you mean 'preempt'?) (known: allocate, backfill, "
            "enqueue, gangpreempt, gangreclaim, preempt, reclaim",
            id="an unknown action name suggests the nearest and lists the known ones",
        ),
        pytest.param(
            'actions: "enqueue, gangPreempt"\n',
            "actions",
            "unknown action 'gangPreempt' (did you mean 'gangpreempt'?)",
            id="action names are exact: another case is unknown, with the right one suggested",
        ),
        pytest.param(
            'actions: "allocate, backfill, allocate"\n',
            "actions",
            "action 'allocate' listed twice",
            id="an action listed twice",
        ),
        pytest.param(
            'actions: "allocate"\ntiers:\n  plugins:\n  - name: gang\n',
            "tiers",
            "must be a list",
            id="tiers as a map instead of a list",
        ),
        pytest.param(
            'actions: "allocate"\ntiers:\n- plugins:\n    name: gang\n',
            "tiers[0].plugins",
            "must be a list",
            id="plugins as a map instead of a list",
        ),
        pytest.param(
            one_plugin("  - gang\n"),
            "tiers[1].plugins[1]",
            "must be a map",
            id="a plugin given as a bare string",
        ),
        pytest.param(
            one_plugin("  - enablePreemptable: false\n"),
            "tiers[1].plugins[1].name",
            "missing or empty plugin name",
            id="a plugin without a name",
        ),
        pytest.param(
            one_plugin("  - name: priority\n"),
            "tiers[1].plugins[1].name",
            "plugin 'priority' already configured at tiers[0].plugins[0]",
            id="a plugin listed twice names both places",
        ),
        pytest.param(
            one_plugin("  - name: drf\n    enablePreemptable: 'false'\n"),
            "tiers[1].plugins[1].enablePreemptable",
            "must be true or false, not 'false'",
            id="an enable flag given as a string",
        ),
        pytest.param(
            one_plugin("  - name: drf\n    enableHierarchy: 1\n"),
            "tiers[1].plugins[1].enableHierarchy",
            "must be true or false, not 1",
            id="enableHierarchy given as a number",
        ),
        pytest.param(
            one_plugin("  - name: binpack\n    arguments:\n      binpack.weight: '10'\n"),
            "tiers[1].plugins[1].arguments['binpack.weight']",
            "valid integer",
            id="a string where an integer argument is expected",
        ),
        pytest.param(
            one_plugin("  - name: binpack\n    arguments:\n      binpack.weight: true\n"),
            "tiers[1].plugins[1].arguments['binpack.weight']",
            "valid integer",
            id="a boolean where an integer argument is expected",
        ),
        pytest.param(
            one_plugin("  - name: binpack\n    arguments:\n      binpack.cpu: 1.5\n"),
            "tiers[1].plugins[1].arguments['binpack.cpu']",
            "valid integer",
            id="a fraction where an integer argument is expected",
        ),
        pytest.param(
            one_plugin("  - name: nodeorder\n    arguments:\n      leastrequested.weight: -1\n"),
            "tiers[1].plugins[1].arguments['leastrequested.weight']",
            "greater than or equal to 0",
            id="a negative node order weight",
        ),
        pytest.param(
            one_plugin("  - name: binpack\n    arguments:\n      binpack.memory: -2\n"),
            "tiers[1].plugins[1].arguments['binpack.memory']",
            "greater than or equal to 0",
            id="a negative binpack weight",
        ),
        pytest.param(
            one_plugin(
                "  - name: predicates\n    arguments:\n      predicate.NodeAffinityEnable: 'no'\n"
            ),
            "tiers[1].plugins[1].arguments['predicate.NodeAffinityEnable']",
            "valid boolean",
            id="a quoted string where a boolean argument is expected",
        ),
        pytest.param(
            one_plugin("  - name: binpack\n    arguments: [binpack.weight]\n"),
            "tiers[1].plugins[1].arguments",
            "must be a map",
            id="arguments as a list",
        ),
        pytest.param(
            'actions: "allocate"\nconfigurations:\n- arguments: {}\n',
            "configurations[0].name",
            "missing action name",
            id="configurations without a name",
        ),
        pytest.param(
            'actions: "allocate"\nconfigurations:\n  allocate: {}\n',
            "configurations",
            "must be a list",
            id="configurations as a map",
        ),
        pytest.param(
            'actions: "allocate"\nconfigurations:\n- name: backfill\n'
            "  arguments:\n    predicateErrorCacheEnable: 0\n",
            "configurations[0].arguments['predicateErrorCacheEnable']",
            "valid boolean",
            id="configurations with a number for a boolean action argument",
        ),
        pytest.param(
            one_plugin("  - name: drf\n    enableHierarchy: true\n  - name: proportion\n"),
            "tiers[1].plugins[1].enableHierarchy",
            "drf with enableHierarchy: true conflicts with proportion",
            id="drf with enableHierarchy together with proportion",
        ),
        pytest.param(
            'actions: "allocate"\nmetrics:\n- prometheus\n',
            "metrics",
            "must be a map",
            id="metrics as a list",
        ),
    ],
)
def test_a_bad_policy_names_the_key_at_fault(text: str, key: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(text)
    assert caught.value.key == key
    assert says in str(caught.value)
    if key:
        assert str(caught.value).startswith(f"{key}: ")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param(
            'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n   - name: drf\n',
            5,
            id="a list item indented wrongly",
        ),
        pytest.param(
            'actions: "enqueue, allocate"\ntiers:\n- plugins:\n\t- name: gang\n',
            4,
            id="a tab used for indentation",
        ),
        pytest.param(
            'actions: "enqueue, allocate\ntiers: []\n', 3, id="a string that is never closed"
        ),
    ],
)
def test_malformed_yaml_reports_the_line(text: str, line: int) -> None:
    with pytest.raises(ConfigError) as caught:
        load(text)
    assert f"invalid YAML at line {line}," in str(caught.value)


def test_a_missing_policy_file_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as caught:
        load_policy_file(missing, REGISTRY)
    assert str(caught.value).startswith(f"{missing}: cannot read policy file")


def test_errors_from_a_file_name_the_file_and_the_key(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(one_plugin("  - name: binpack\n    arguments:\n      binpack.weight: -2\n"))
    with pytest.raises(ConfigError) as caught:
        load_policy_file(path, REGISTRY)
    assert str(caught.value).startswith(
        f"{path}: tiers[1].plugins[1].arguments['binpack.weight']: "
    )


# -- what Volcano passes over: a warning naming the key, or (strict) an error ---------------------

_PASSED_OVER = [
    pytest.param(
        'actions: "allocate"\ntier:\n- plugins: []\n',
        "tier",
        "not a policy key (did you mean 'tiers'?); ignored",
        id="an unknown top-level key suggests the nearest",
    ),
    pytest.param(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  name: first\n',
        "tiers[0].name",
        "not a tier key (plugins); ignored",
        id="a tier with a key other than plugins",
    ),
    pytest.param(
        one_plugin("  - name: topology910\n"),
        "tiers[1].plugins[1].name",
        "unknown plugin 'topology910': neither built in nor installed as an entry point; "
        "the other plugins run without it",
        id="a plugin of a fork of Volcano",
    ),
    pytest.param(
        one_plugin("  - name: proportoin\n"),
        "tiers[1].plugins[1].name",
        "unknown plugin 'proportoin' (did you mean 'proportion'?)",
        id="a misspelt plugin name suggests the nearest",
    ),
    pytest.param(
        one_plugin("  - name: drf\n    enableJobOrdr: false\n"),
        "tiers[1].plugins[1].enableJobOrdr",
        "not a plugin option (did you mean 'enableJobOrder'?); ignored",
        id="a misspelt enable flag",
    ),
    pytest.param(
        one_plugin("  - name: predicates\n    arguments:\n    predicate.VolumeZoneEnable: false\n"),
        "tiers[1].plugins[1].predicate.VolumeZoneEnable",
        "not a plugin option (an argument: it belongs under 'arguments:'); ignored",
        id="an argument written beside arguments instead of inside it",
    ),
    pytest.param(
        one_plugin("  - name: binpack\n    arguments:\n      binpack.wieght: 2\n"),
        "tiers[1].plugins[1].arguments['binpack.wieght']",
        "nothing reads this key (did you mean 'binpack.weight'?); ignored",
        id="a misspelt plugin argument",
    ),
    pytest.param(
        one_plugin("  - name: sla\n    arguments:\n      sla.JobWaitingTime: 1h\n"),
        "tiers[1].plugins[1].arguments['sla.JobWaitingTime']",
        "nothing reads this key (did you mean 'sla-waiting-time'?); ignored",
        id="an argument key from Volcano's docs that its code never reads",
    ),
    pytest.param(
        'actions: "allocate"\nconfigurations:\n- name: warmup\n  arguments: {a: "1"}\n',
        "configurations[0].name",
        "no action 'warmup'; its arguments are ignored",
        id="configurations for an action Caldera does not run",
    ),
    pytest.param(
        'actions: "allocate"\nconfigurations:\n- name: allocate\n  args: {}\n',
        "configurations[0].args",
        "not a configuration key (name, arguments); ignored",
        id="configurations with an unknown key",
    ),
    pytest.param(
        'actions: "allocate"\nconfigurations:\n- name: allocate\n'
        "  arguments:\n    predicateErrCacheEnable: false\n",
        "configurations[0].arguments['predicateErrCacheEnable']",
        "nothing reads this key (did you mean 'predicateErrorCacheEnable'?); ignored",
        id="configurations with a misspelt action argument",
    ),
    pytest.param(
        'actions: "reclaim"\nconfigurations:\n- name: reclaim\n'
        "  arguments:\n    enableTopologyAwarePreemption: true\n",
        "configurations[0].arguments['enableTopologyAwarePreemption']",
        "nothing reads this key",
        id="reclaim has no topology-aware mode (Volcano's reclaim.go reads no such key)",
    ),
]


@pytest.mark.parametrize(("text", "key", "says"), _PASSED_OVER)
def test_what_volcano_passes_over_is_one_warning_naming_the_key(
    text: str, key: str, says: str
) -> None:
    policy = load(text)
    assert [w.key for w in policy.warnings] == [key]
    assert says in policy.warnings[0].message
    assert str(policy.warnings[0]).startswith(f"{key}: ")


@pytest.mark.parametrize(("text", "key", "says"), _PASSED_OVER)
def test_strict_loading_refuses_what_volcano_passes_over(text: str, key: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_policy(text, REGISTRY, strict=True)
    assert caught.value.key == key
    assert "refused: strict policy checking" in str(caught.value)


def test_the_rest_of_a_policy_with_warnings_is_in_force() -> None:
    policy = load(
        one_plugin(
            "  - name: topology910\n  - name: binpack\n    arguments:\n"
            "      binpack.wieght: 2\n      binpack.weight: 7\n"
        )
    )
    assert policy.layout == [["priority"], ["gang", "binpack"]]
    option = policy.option("binpack")
    assert option is not None
    assert option.args.weight == 7  # type: ignore[attr-defined]
    assert len(policy.warnings) == 2


def test_a_wrong_value_of_a_known_key_stays_an_error_beside_an_unknown_key() -> None:
    text = one_plugin(
        "  - name: binpack\n    arguments:\n      binpack.wieght: 2\n      binpack.cpu: x\n"
    )
    with pytest.raises(ConfigError) as caught:
        load(text)
    assert caught.value.key == "tiers[1].plugins[1].arguments['binpack.cpu']"


def test_what_follows_a_document_end_marker_is_not_read() -> None:
    # Volcano's decoder reads the first document: the list after '...' is never parsed
    policy = load(
        'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'
        "configurations:\n...\n- name: init-params\n  arguments: {}\n"
    )
    assert policy.layout == [["gang"]]
    assert policy.warnings == ()


def test_a_second_yaml_document_is_not_read() -> None:
    policy = load('actions: "allocate"\n---\nactions: "enqueue"\n')
    assert [a.name for a in policy.actions] == ["allocate"]


# -- what a valid policy turns into ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "disabled", "hierarchy"),
    [
        pytest.param("", set(), False, id="no flag: every point on"),
        pytest.param(
            "    enablePreemptable: false\n",
            {"preemptable"},
            False,
            id="one flag off, one point off",
        ),
        pytest.param(
            "    enablePredicate: false\n",
            {"predicate", "pre_predicate", "simulate_predicate", "node_check"},
            False,
            id="enablePredicate off switches off predicate, pre-predicate and simulate",
        ),
        pytest.param(
            "    enableJobEnqueued: false\n",
            {"job_enqueueable", "job_enqueued"},
            False,
            id="enableJobEnqueued off switches off job enqueueable and job enqueued",
        ),
        pytest.param(
            "    enableJobOrder: true\n    enableNodeOrder: true\n",
            set(),
            False,
            id="flags set true change nothing",
        ),
        pytest.param(
            "    enabledOverused: false\n    enableJobOrder: false\n    enablePreemptive: true\n",
            {"overused", "job_order"},
            False,
            id="several flags: only the false ones count",
        ),
        pytest.param(
            "    enableHierarchy: false\n",
            set(),
            False,
            id="enableHierarchy is an option not a point",
        ),
    ],
)
def test_enable_flags_populate_disabled(options: str, disabled: set[str], hierarchy: bool) -> None:
    policy = load(one_plugin("  - name: drf\n" + options))
    drf = policy.option("drf")
    assert drf is not None
    assert drf.disabled == disabled
    assert drf.hierarchy is hierarchy
    for point in ("job_order", "preemptable", "predicate", "overused", "job_enqueued"):
        assert drf.enabled(point) is (point not in disabled)


def test_configurations_reach_the_action_args() -> None:
    policy = load(
        """\
actions: "enqueue, allocate, backfill"
configurations:
- name: allocate
  arguments:
    predicateErrorCacheEnable: false
"""
    )
    args = {spec.name: spec.args for spec in policy.actions}
    assert args["allocate"].predicate_error_cache_enable is False  # type: ignore[attr-defined]
    assert args["backfill"].predicate_error_cache_enable is True  # type: ignore[attr-defined]


def test_configurations_for_an_action_not_in_the_list_are_checked_but_unused() -> None:
    policy = load(
        'actions: "allocate"\nconfigurations:\n- name: backfill\n'
        "  arguments:\n    predicateErrorCacheEnable: false\n"
    )
    assert [spec.name for spec in policy.actions] == ["allocate"]


def test_plugin_arguments_are_validated_into_the_plugins_args_model() -> None:
    policy = load(
        one_plugin(
            "  - name: binpack\n    arguments:\n      binpack.weight: 10\n"
            "      binpack.resources: nvidia.com/gpu\n      binpack.resources.nvidia.com/gpu: 3\n"
            "  - name: predicates\n    arguments:\n      predicate.CacheEnable: yes\n"
        )
    )
    binpack = policy.option("binpack")
    predicates = policy.option("predicates")
    assert binpack is not None and predicates is not None
    assert binpack.args.weight == 10  # type: ignore[attr-defined]
    assert binpack.args.weights()["nvidia.com/gpu"] == 3  # type: ignore[attr-defined]
    assert predicates.args.cache is True  # type: ignore[attr-defined]


def test_a_negative_binpack_resource_weight_is_rejected_naming_it() -> None:
    with pytest.raises(ConfigError) as caught:
        load(
            one_plugin(
                "  - name: binpack\n    arguments:\n      binpack.resources.nvidia.com/gpu: -1\n"
            )
        )
    assert caught.value.key.startswith("tiers[1].plugins[1].arguments")
    assert "binpack.resources.nvidia.com/gpu" in str(caught.value)


def test_metrics_and_missing_tiers_are_accepted() -> None:
    policy = load('actions: "enqueue"\nmetrics:\n  type: prometheus\n  interval: 30s\n')
    assert policy.tiers == ()
    assert policy.metrics == {"type": "prometheus", "interval": "30s"}


# -- the shipped policy files ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "layout", "disabled"),
    [
        pytest.param(
            "default.yaml",
            [
                ["priority", "gang", "conformance"],
                ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
            ],
            {},
            id="default is Volcano's DefaultSchedulerConf",
        ),
        pytest.param(
            "volcano-helm.yaml",
            [
                ["priority", "gang", "conformance"],
                ["overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"],
            ],
            {"gang": {"preemptable"}, "drf": {"preemptable"}},
            id="helm is the chart's volcano-scheduler.conf",
        ),
        pytest.param(
            "volcano-ci.yaml",
            [
                ["priority", "gang", "conformance", "sla"],
                [
                    "overcommit",
                    "drf",
                    "predicates",
                    "proportion",
                    "nodeorder",
                    "binpack",
                    "network-topology-aware",
                ],
            ],
            {"gang": {"preemptable"}, "drf": {"preemptable"}},
            id="ci is the chart's CI config, complete",
        ),
    ],
)
def test_shipped_policy_files_load(
    file: str, layout: list[list[str]], disabled: dict[str, set[str]]
) -> None:
    policy = load_policy_file(POLICIES / file, REGISTRY)
    actions = ["enqueue", "allocate", "backfill"]
    if file == "volcano-ci.yaml":
        actions += ["reclaim", "preempt"]  # as Volcano's CI runs them
    assert [a.name for a in policy.actions] == actions
    assert policy.layout == layout
    assert {o.name: set(o.disabled) for t in policy.tiers for o in t if o.disabled} == disabled


def test_the_ci_policy_turns_on_dynamic_resource_allocation_in_predicates() -> None:
    predicates = load_policy_file(POLICIES / "volcano-ci.yaml", REGISTRY).option("predicates")
    assert predicates is not None
    assert predicates.args.dynamic_resource_allocation is True  # type: ignore[attr-defined]


def test_default_yaml_is_the_built_in_default() -> None:
    from_file = load_policy_file(POLICIES / "default.yaml", REGISTRY)
    built_in = load(DEFAULT_POLICY_YAML)
    assert from_file.actions == built_in.actions
    assert from_file.tiers == built_in.tiers
    assert from_file.metrics == built_in.metrics


# -- the command line -----------------------------------------------------------------------------


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        """\
apiVersion: v1
kind: Node
metadata:
  name: n1
status:
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
  conditions: [{type: Ready, status: "True"}]
"""
    )
    return path


@pytest.mark.parametrize(
    ("policy_text", "key"),
    [
        pytest.param(
            one_plugin("  - name: binpack\n    arguments:\n      binpack.weight: -2\n"),
            "tiers[1].plugins[1].arguments['binpack.weight']",
            id="a negative plugin weight",
        ),
        pytest.param(
            'actions: "enqueue, allocate, preemptpf"\n', "actions", id="an action Caldera lacks"
        ),
        pytest.param(
            'actions: "allocate"\ntiers: [\n', "invalid YAML at line", id="malformed YAML"
        ),
    ],
)
def test_the_cli_exits_2_naming_the_key_of_a_bad_policy(
    tmp_path: Path, manifest: Path, capsys: pytest.CaptureFixture[str], policy_text: str, key: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(policy_text)
    assert main(["simulate", "--policy", str(bad), str(manifest)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"caldera: invalid policy: {bad}: ")
    assert key in err


def test_the_cli_warns_of_a_key_nothing_reads_and_refuses_it_with_strict(
    tmp_path: Path, manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(one_plugin("  - name: binpack\n    arguments:\n      binpack.wieght: 2\n"))
    key = "tiers[1].plugins[1].arguments['binpack.wieght']"
    assert main(["simulate", "--policy", str(policy), str(manifest)]) == 0
    out, err = capsys.readouterr()
    assert f"caldera: policy: {policy}: {key}: nothing reads this key" in err
    assert "== cycle 1 ==" in out
    assert main(["simulate", "--strict", "--policy", str(policy), str(manifest)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"caldera: invalid policy: {policy}: {key}: ")


@pytest.mark.parametrize("file", ["default.yaml", "volcano-helm.yaml", "volcano-ci.yaml"])
def test_the_cli_runs_with_each_shipped_policy(
    manifest: Path, capsys: pytest.CaptureFixture[str], file: str
) -> None:
    assert main(["simulate", "--policy", str(POLICIES / file), str(manifest)]) == 0
    assert "invalid policy" not in capsys.readouterr().err


def test_enable_hierarchy_on_a_plugin_without_hierarchy_support_is_an_error() -> None:
    text = """
actions: "allocate"
tiers:
- plugins:
  - name: drf
    enableHierarchy: true
  - name: gang
    enableHierarchy: true
"""
    drf_only = text.replace("  - name: gang\n    enableHierarchy: true\n", "  - name: gang\n")
    assert drf_only != text
    assert load_policy(drf_only, REGISTRY)  # hierarchical drf is there
    with pytest.raises(ConfigError) as exc:
        load_policy(text, REGISTRY)
    assert exc.value.key == "tiers[0].plugins[1].enableHierarchy"
    assert "does not implement hierarchical queues" in str(exc.value)


def test_enable_hierarchy_false_is_accepted_anywhere() -> None:
    text = """
actions: "allocate"
tiers:
- plugins:
  - name: drf
    enableHierarchy: false
"""
    assert load_policy(text, REGISTRY).tiers[0][0].hierarchy is False
