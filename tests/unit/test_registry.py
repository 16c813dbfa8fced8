"""The registry: built-ins through entry points, third-party plugins, and name errors."""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import EntryPoint
from typing import Any, ClassVar

import pytest
from pydantic import Field

import builders
from caldera.errors import ConfigError
from caldera.framework import registry as registry_module
from caldera.framework.interfaces import SessionView
from caldera.framework.plugin import Args, NoArgs, Plugin
from caldera.framework.policy import load_policy
from caldera.framework.registry import ACTION_GROUP, PLUGIN_GROUP, Registry
from caldera.plugins.gang import GangPlugin
from caldera.plugins.priority import PriorityPlugin

BUILT_IN_PLUGINS = [
    "binpack",
    "capacity",
    "cdp",
    "conformance",
    "deviceshare",
    "drf",
    "extender",
    "gang",
    "network-topology-aware",
    "nodegroup",
    "nodeorder",
    "numa-aware",
    "overcommit",
    "pdb",
    "predicates",
    "priority",
    "proportion",
    "rescheduling",
    "resource-strategy-fit",
    "resourcequota",
    "sla",
    "task-topology",
    "tdm",
    "usage",
]
BUILT_IN_ACTIONS = [
    "allocate",
    "backfill",
    "enqueue",
    "gangpreempt",
    "gangreclaim",
    "preempt",
    "reclaim",
    "shuffle",
]


def test_entry_points_provide_every_built_in_plugin_and_action() -> None:
    reg = Registry.from_entry_points()
    assert reg.plugin_names() == BUILT_IN_PLUGINS
    assert reg.action_names() == BUILT_IN_ACTIONS


@pytest.mark.parametrize("name", BUILT_IN_PLUGINS)
def test_each_built_in_plugin_loads_as_a_class_of_that_name(name: str) -> None:
    cls = Registry.from_entry_points().plugin(name)
    assert issubclass(cls, Plugin)
    assert cls.name == name


@pytest.mark.parametrize("name", BUILT_IN_ACTIONS)
def test_each_built_in_action_loads_as_a_class_of_that_name(name: str) -> None:
    cls = Registry.from_entry_points().action(name)
    assert cls.name == name


@pytest.mark.parametrize(
    ("kind", "name", "known"),
    [
        pytest.param("plugin", "topology910", ", ".join(BUILT_IN_PLUGINS), id="an unknown plugin"),
        pytest.param("action", "preemptpf", ", ".join(BUILT_IN_ACTIONS), id="an unknown action"),
        pytest.param("plugin", "Gang", ", ".join(BUILT_IN_PLUGINS), id="names are case-sensitive"),
    ],
)
def test_an_unknown_name_lists_the_known_ones(kind: str, name: str, known: str) -> None:
    reg = Registry.from_entry_points()
    with pytest.raises(ConfigError) as caught:
        reg.plugin(name) if kind == "plugin" else reg.action(name)
    assert str(caught.value) == f"unknown {kind} {name!r} (known: {known})"


def test_an_empty_registry_says_it_knows_none() -> None:
    with pytest.raises(ConfigError, match=r"unknown plugin 'gang' \(known: none\)"):
        Registry().plugin("gang")


# -- third-party plugins --------------------------------------------------------------------------


class AvoidArgs(Args):
    node: str = Field("", alias="avoid.node")


class AvoidPlugin(Plugin[AvoidArgs]):
    """A third-party plugin: keeps pods off the node named in its argument."""

    name: ClassVar[str] = "avoid"
    Args = AvoidArgs
    opened: ClassVar[list[str]] = []
    closed: ClassVar[list[str]] = []

    def on_session_open(self, ssn: SessionView) -> None:
        AvoidPlugin.opened.append(ssn.uid)
        avoided = [name == self.args.node for name in ssn.nodes.names]

        def predicate(task: Any) -> list[tuple[str, Any]]:
            import numpy as np

            return [("avoided by policy", np.array(avoided, dtype=bool))]

        ssn.predicate_point.add(self.name, predicate)

    def on_session_close(self, ssn: SessionView) -> None:
        AvoidPlugin.closed.append(ssn.uid)


@pytest.fixture
def avoid_registry() -> Registry:
    AvoidPlugin.opened.clear()
    AvoidPlugin.closed.clear()
    reg = Registry.from_entry_points()
    reg.add_plugin(AvoidPlugin)
    return reg


AVOID_POLICY = """\
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: avoid
    arguments:
      avoid.node: n1
  - name: nodeorder
"""


def test_a_third_party_plugin_is_opened_and_closed_every_cycle_and_its_filter_applies(
    avoid_registry: Registry,
) -> None:
    sim = builders.scenario(
        [builders.node("n1", cpu="8"), builders.node("n2", cpu="2"), builders.pod("p")],
        policy_yaml=AVOID_POLICY,
        registry=avoid_registry,
        cycles=2,
    )
    # n1 has more room (nodeorder would prefer it); the third-party filter keeps p off it.
    assert builders.binds(sim) == {"default/p": "n2"}
    session_ids = [rec.result.session_id for rec in sim.cycles]
    assert AvoidPlugin.opened == session_ids
    assert AvoidPlugin.closed == session_ids


def test_a_third_party_plugins_arguments_are_validated_when_the_policy_loads(
    avoid_registry: Registry,
) -> None:
    policy = load_policy(AVOID_POLICY.replace("avoid.node: n1", "avoid.nodes: n1"), avoid_registry)
    assert [w.key for w in policy.warnings] == ["tiers[1].plugins[1].arguments['avoid.nodes']"]
    assert "did you mean 'avoid.node'?" in str(policy.warnings[0])
    with pytest.raises(ConfigError) as caught:
        load_policy(AVOID_POLICY.replace("avoid.node: n1", "avoid.node: 1"), avoid_registry)
    assert caught.value.key == "tiers[1].plugins[1].arguments['avoid.node']"


def test_a_third_party_plugin_is_unknown_to_a_registry_it_was_not_added_to() -> None:
    policy = load_policy(AVOID_POLICY, builders.REGISTRY)
    assert [w.key for w in policy.warnings] == ["tiers[1].plugins[1].name"]
    assert "unknown plugin 'avoid'" in str(policy.warnings[0])
    assert "avoid" not in policy.layout[1]


# -- ambiguous and inconsistent providers ---------------------------------------------------------


class OtherGang(Plugin[NoArgs]):
    name: ClassVar[str] = "gang"


def test_two_plugins_of_one_name_are_an_error_when_the_name_is_used() -> None:
    reg = Registry.from_entry_points()
    reg.add_plugin(OtherGang)
    assert reg.plugin_names() == BUILT_IN_PLUGINS
    with pytest.raises(ConfigError, match=r"plugin 'gang' is provided by 2 packages"):
        reg.plugin("gang")
    with pytest.raises(ConfigError) as caught:
        load_policy('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n', reg)
    assert caught.value.key == "tiers[0].plugins[0].name"
    assert reg.plugin("priority") is PriorityPlugin  # other names are unaffected


def installed_registry(
    monkeypatch: pytest.MonkeyPatch,
    plugins: Sequence[tuple[str, str]],
    actions: Sequence[tuple[str, str]] = (),
) -> Registry:
    """``Registry.from_entry_points()`` when exactly these (name, "module:attr") entry points are
    installed."""
    groups = {PLUGIN_GROUP: plugins, ACTION_GROUP: actions}

    def entry_points(*, group: str) -> list[EntryPoint]:
        return [EntryPoint(name, value, group) for name, value in groups[group]]

    monkeypatch.setattr(registry_module, "entry_points", entry_points)
    return Registry.from_entry_points()


def test_two_installed_packages_providing_one_plugin_name_are_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reg = installed_registry(
        monkeypatch,
        [
            ("gang", "caldera.plugins.gang:GangPlugin"),
            ("gang", "caldera.plugins.gang:GangPlugin"),
            ("priority", "caldera.plugins.priority:PriorityPlugin"),
        ],
    )
    with pytest.raises(ConfigError, match=r"plugin 'gang' is provided by 2 packages"):
        reg.plugin("gang")
    assert reg.plugin("priority") is PriorityPlugin


def test_an_entry_point_whose_class_has_another_name_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reg = installed_registry(
        monkeypatch,
        [("gang", "caldera.plugins.priority:PriorityPlugin")],
        [("reclaim", "caldera.actions.allocate:AllocateAction")],
    )
    with pytest.raises(ConfigError) as caught:
        reg.plugin("gang")
    assert str(caught.value) == "plugin 'gang' resolves to a class named 'priority'"
    with pytest.raises(ConfigError, match=r"action 'reclaim' resolves to a class named 'allocate'"):
        reg.action("reclaim")


def test_an_entry_point_that_is_not_a_plugin_class_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigError, match=r"plugin 'gang' resolves to a class named None"):
        installed_registry(monkeypatch, [("gang", "caldera.errors:ConfigError")]).plugin("gang")


def test_a_broken_package_fails_only_when_its_name_is_used_and_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reg = installed_registry(
        monkeypatch,
        [
            ("gang", "caldera.plugins.gang:GangPlugin"),
            ("broken", "caldera.plugins.no_such_module:Plugin"),
        ],
        [("allocate", "caldera.actions.allocate:AllocateAction")],
    )
    assert reg.plugin_names() == ["broken", "gang"]
    assert reg.plugin("gang") is GangPlugin
    with pytest.raises(ConfigError, match=r"plugin 'broken' cannot be loaded: ModuleNotFoundError"):
        reg.plugin("broken")
    with pytest.raises(ConfigError) as caught:
        load_policy('actions: "allocate"\ntiers:\n- plugins:\n  - name: broken\n', reg)
    assert caught.value.key == "tiers[0].plugins[0].name"
