"""Every command on broken input: an answer, or one line on stderr — never a traceback.

A seeded generator mutates valid manifests and policies (truncation, deleted keys, values of the
wrong type, huge numbers, unicode, binary bytes, wrong kinds, documents that are not maps, deeply
nested junk) and feeds each result through ``caldera simulate``, ``caldera explain`` and
``caldera run``. Whatever the input, the exit code is 0, 1 or 2, every stderr line is one
``caldera:`` message, exit 2 comes with one, and the last-resort internal-error guard never fires.
The same seed gives the same cases, so a failure names a case that can be replayed.
"""

from __future__ import annotations

import copy
import gc
import logging
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from caldera.cli import main

ROOT = Path(__file__).resolve().parents[2]
SEED = 20250101
MANIFEST_CASES = 72
POLICY_CASES = 48
RUN_CASES = 30

EXTRAS = """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: leaf-a}
spec: {tier: 1, members: [{type: Node, selector: {regexMatch: {pattern: "^cpu-"}}}]}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec: {storageClassName: local, resources: {requests: {storage: 1Gi}}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: cpu-1-gpus}
spec:
  driver: gpu.example.com
  nodeName: cpu-1
  pool: {name: cpu-1, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0, capacity: {memory: {value: 80Gi}}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-gpu, namespace: default}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {selector: {app: web}}
---
apiVersion: v1
kind: Pod
metadata: {name: target, namespace: default, labels: {app: web}}
spec:
  schedulerName: volcano
  priorityClassName: high
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m, memory: 1Gi}}}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]
  resourceClaims: [{name: gpu, resourceClaimName: one-gpu}]
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 10
        podAffinityTerm: {labelSelector: {matchLabels: {app: web}}, topologyKey: zone}
"""

JUNK: list[Any] = [
    None,
    True,
    -1,
    0,
    10**40,
    -(10**40),
    1e308,
    float("nan"),
    "",
    "1x",
    "-5",
    "9" * 60,
    "1e400",
    "ñ漢字🙂\u202e\u0301",
    "a\nb",
    [],
    [1, "two", None],
    {},
    {"a": {"b": [1, {"c": None}]}},
    "2025-13-45T99:99:99Z",
    "Exists",
    "NoSchedule",
]
"""Values that do not belong where they land."""

KINDS = ["Node", "Pod", "PodGroup", "Queue", "HyperNode", "ResourceSlice", "List", "Nope", 7]
TEXT_JUNK = [":", "[", "{", "]", "}", "\t", "&a", "*a", "!!binary", "- ", "? ", "%", "'", '"', "|"]


def documents(text: str) -> list[Any]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def base_manifests() -> list[list[Any]]:
    examples = sorted((ROOT / "examples").glob("*.yaml"))
    gpu = sorted((ROOT / "examples" / "gpu-sharing").glob("*.yaml"))
    cluster = [d for p in examples for d in documents(p.read_text())]
    return [
        cluster + documents(EXTRAS),
        [d for p in gpu for d in documents(p.read_text())],
    ]


def base_policies() -> list[str]:
    texts = [p.read_text() for p in sorted((ROOT / "policies").glob("*.yaml"))]
    return [*texts, (ROOT / "manifests" / "30-configmap.yaml").read_text()]


def paths(node: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a document: map keys and list indices, depth first."""
    yield at
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, (*at, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from paths(value, (*at, i))


def nested(rng: random.Random, depth: int) -> Any:
    value: Any = rng.choice(JUNK[:10])
    for _ in range(depth):
        value = [value] if rng.random() < 0.5 else {"k": value}
    return value


def mutate_structure(rng: random.Random, docs: list[Any]) -> list[Any]:
    docs = copy.deepcopy(docs)
    at = rng.randrange(len(docs))
    spots = list(paths(docs[at]))[1:]
    how = rng.choice(["delete", "retype", "retype", "kind", "not a map", "nest", "duplicate"])
    if how == "kind" and isinstance(docs[at], dict):
        docs[at]["kind"] = rng.choice(KINDS)
    elif how == "not a map":
        docs[at] = rng.choice([[docs[at]], "just text", 42, None, [[]]])
    elif how == "duplicate":
        docs.append(copy.deepcopy(docs[at]))
    elif spots:
        where = rng.choice(spots)
        parent = docs[at]
        for step in where[:-1]:
            parent = parent[step]
        if how == "delete":
            del parent[where[-1]]
        elif how == "nest":
            parent[where[-1]] = nested(rng, rng.choice([5, 40, 120]))
        else:
            parent[where[-1]] = copy.deepcopy(rng.choice(JUNK))
    return docs


def mutate_text(rng: random.Random, text: str) -> bytes:
    how = rng.choice(["truncate", "splice", "bytes", "deep", "noise"])
    raw = text.encode()
    cut = rng.randrange(len(raw) + 1)
    if how == "truncate":
        return raw[:cut]
    if how == "splice":
        return raw[:cut] + rng.choice(TEXT_JUNK).encode() + raw[cut:]
    if how == "bytes":
        return raw[:cut] + rng.randbytes(rng.randrange(1, 16)) + raw[cut:]
    if how == "deep":
        return raw + b"\n---\nx: " + b"[" * rng.choice([50, 5000]) + b"\n"
    return rng.randbytes(rng.randrange(1, 300))


def dump(docs: list[Any]) -> bytes:
    return yaml.safe_dump_all(docs, allow_unicode=True, sort_keys=False).encode()


def broken(rng: random.Random, docs: list[Any]) -> bytes:
    """A mutated copy of ``docs`` (one to three changes), as file bytes."""
    for _ in range(rng.randrange(1, 4)):
        docs = mutate_structure(rng, docs)
    data = dump(docs)
    return mutate_text(rng, data.decode()) if rng.random() < 0.3 else data


def broken_policy(rng: random.Random, text: str) -> bytes:
    if rng.random() < 0.4:
        return mutate_text(rng, text)
    docs = documents(text)
    if not docs:
        return text.encode()
    for _ in range(rng.randrange(1, 3)):
        docs = mutate_structure(rng, docs)
    if docs and isinstance(docs[0], dict) and isinstance(docs[0].get("data"), dict):
        # a ConfigMap: break the policy inside it as well, now and then
        inner = docs[0]["data"].get("volcano-scheduler.conf")
        if isinstance(inner, str) and rng.random() < 0.5:
            docs[0]["data"]["volcano-scheduler.conf"] = broken_policy(rng, inner).decode(
                errors="replace"
            )
    return dump(docs)


@pytest.fixture
def restore_process_state() -> Iterator[None]:
    """``caldera run`` configures logging and the collector for a long-running process."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    threshold = gc.get_threshold()
    yield
    root.handlers[:], root.level = handlers, level
    gc.set_threshold(*threshold)


def run_case(
    capsys: pytest.CaptureFixture[str], argv: list[str], case: str, *, one_line: bool = False
) -> int:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse: usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    context = f"{case}: caldera {' '.join(argv)}\nstderr: {err}"
    assert "Traceback" not in err and "internal error" not in err, context
    assert code in (0, 1, 2), context
    lines = err.splitlines()
    assert all(line.startswith("caldera: ") for line in lines), context
    if code == 2:
        assert lines, context
        assert out == "", context
        if one_line:
            assert len(lines) == 1, context
    return code


def test_broken_manifests_get_an_answer_or_one_line_from_simulate_and_explain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(SEED)
    bases = base_manifests()
    policy = str(ROOT / "policies" / "hami-gpu-sharing.yaml")
    codes = set()
    for case in range(MANIFEST_CASES):
        path = tmp_path / f"case-{case}.yaml"
        path.write_bytes(broken(rng, rng.choice(bases)))
        name = f"manifest case {case}"
        strict = ["--strict"] if rng.random() < 0.5 else []
        output = rng.choice(["table", "json"])
        codes.add(
            run_case(
                capsys, ["simulate", *strict, "--output", output, "--cycles", "2", str(path)], name
            )
        )
        pod = rng.choice(["default/target", "research/resnet50-0", "nope", "default/"])
        codes.add(run_case(capsys, ["explain", "--policy", policy, pod, str(path)], name))
    assert codes == {0, 1, 2}, "the cases should cover clean runs, problems and errors"


def test_broken_policies_get_an_answer_or_one_line_from_simulate_and_explain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(SEED + 1)
    bases = base_policies()
    cluster = tmp_path / "cluster.yaml"
    names = ("00-nodes.yaml", "01-queues.yaml", "03-research-resnet.yaml")
    cluster.write_text("---\n".join((ROOT / "examples" / n).read_text() for n in names))
    codes = set()
    for case in range(POLICY_CASES):
        path = tmp_path / f"policy-{case}.yaml"
        path.write_bytes(broken_policy(rng, rng.choice(bases)))
        name = f"policy case {case}"
        argv = ["simulate", "--policy", str(path), "--output", "json", str(cluster)]
        codes.add(run_case(capsys, argv, name, one_line=True))
        argv = ["explain", "--policy", str(path), "research/resnet50-0", str(cluster)]
        codes.add(run_case(capsys, argv, name, one_line=True))
    assert codes == {0, 2}


RUN_FLAGS: list[list[str]] = [
    ["--schedule-period", "soon"],
    ["--schedule-period", "-1s"],
    ["--bind-workers", "0"],
    ["--bind-workers", "9" * 30],
    ["--leader-elect", "maybe"],
    ["--leader-elect-lease-duration", "1s", "--leader-elect-renew-deadline", "5s"],
    ["--log-format", "xml"],
    ["--no-such-flag"],
    ["--api-wait", "1ms"],
    ["--leader-elect=false"],
    ["--scheduler-name", ""],
    [],
]


def test_caldera_run_fails_fast_in_one_line_on_a_bad_policy_kubeconfig_or_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_process_state: None
) -> None:
    rng = random.Random(SEED + 2)
    bases = base_policies()[:-1]  # run reads a bare volcano-scheduler.conf, as it is mounted
    junk_config = tmp_path / "kubeconfig"
    junk_config.write_bytes(b"apiVersion: v1\nclusters: [\x01\n")
    for case in range(RUN_CASES):
        policy = tmp_path / f"conf-{case}.yaml"
        policy.write_bytes(broken_policy(rng, rng.choice(bases)))
        kubeconfig = rng.choice([str(tmp_path / "missing"), str(junk_config), str(tmp_path)])
        argv = [
            "run",
            "--scheduler-conf",
            str(policy),
            "--kubeconfig",
            kubeconfig,
            *rng.choice(RUN_FLAGS),
        ]
        assert run_case(capsys, argv, f"run case {case}", one_line=True) == 2
