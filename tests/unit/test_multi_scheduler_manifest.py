"""``manifests/extra/multi-scheduler-statefulset.yaml``: the hash split as Volcano deploys it.
Its command is one ``caldera run`` takes, its environment turns the split on over as many names
as it has replicas, and the replicas are not each other's standby."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from caldera.cli import _parser
from caldera.operator.settings import Settings

MANIFEST = Path(__file__).resolve().parents[2] / "manifests/extra/multi-scheduler-statefulset.yaml"


def statefulset() -> dict[str, Any]:
    docs: list[dict[str, Any]] = list(yaml.safe_load_all(MANIFEST.read_text()))
    (found,) = [d for d in docs if d["kind"] == "StatefulSet"]
    return found


def test_each_replica_is_a_slot_of_the_hash_split() -> None:
    sts = statefulset()
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    env: dict[str, str] = {}
    for entry in container["env"]:
        if "value" in entry:
            env[entry["name"]] = entry["value"]
        elif entry["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name":
            env[entry["name"]] = f"{sts['metadata']['name']}-1"  # what the kubelet fills in
    scope = Settings().scope(env)
    assert scope.me == "caldera-scheduler-1"
    assert len(scope.members) == sts["spec"]["replicas"]
    assert sts["spec"]["serviceName"] == "caldera-scheduler"


def test_its_command_is_one_caldera_run_takes_without_leader_election() -> None:
    (container,) = statefulset()["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    assert command[:2] == ["caldera", "run"]
    args = _parser().parse_args(command[1:])
    assert args.leader_elect is False
    assert args.scheduler_names == ["volcano"]


CONTROLLER = MANIFEST.parent / "sharding-controller.yaml"


def test_the_sharding_controller_manifest_runs_a_command_caldera_takes() -> None:
    docs: list[dict[str, Any]] = list(yaml.safe_load_all(CONTROLLER.read_text()))
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = _parser().parse_args(container["command"][1:])
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap"]
    assert (args.sharding_configmap, args.sharding_configmap_namespace) == (
        config_map["metadata"]["name"],
        config_map["metadata"]["namespace"],
    )
    from caldera.sharding.assign_config import parse_sharding_configmap

    config = parse_sharding_configmap(config_map["data"])
    assert config is not None
    assert [s.name for s in config.scheduler_configs] == ["agent-scheduler", "volcano"]
