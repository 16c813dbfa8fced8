"""How fast and how small: a pod's JSON decoded into Caldera's pod record, and as plain dicts.

Why: at 50,000 running pods each process holds a decoded pod per pod, and a restart decodes all
of them before the first session. This measures, for the pod JSON a real API server sends
(managed fields, env, volume mounts, a projected token volume, container statuses) and for the
thin pods the operator benchmark creates, per pod:

- ``record``: :class:`caldera.models.core.Pod`, a msgspec struct of what scheduling and the
  writers read, decoded straight from the bytes (what the operator's cache and the session
  process do);
- ``record from dict``: the same from the dicts orjson gives (what reading manifests does);
- ``orjson``: plain dicts and lists (no types, every field kept).

It reports microseconds to decode, and bytes held (tracemalloc, after a collection). The pydantic
models the pod was before measured 99 µs and 10.9 KB (real pod), 37 µs and 4.8 KB (benchmark pod)
on the same machine: docs/performance.md.

    python benchmarks/pod_decode.py [--pods 20000]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _api_server as api
from caldera.models.core import Pod

# -- pod JSON as an API server sends it ----------------------------------------------------------


def real_pod(i: int) -> dict[str, Any]:
    """A Deployment's running pod as kube-apiserver returns it."""
    name = f"web-7d9f8b6c5d-{i:05d}"
    env = [{"name": f"SETTING_{k}", "value": f"value-{k}-{i}"} for k in range(10)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": "web-7d9f8b6c5d-",
            "namespace": "shop",
            "uid": f"0f3c2a4e-1b2d-4c5e-8f9a-{i:012d}",
            "resourceVersion": str(1000 + i),
            "creationTimestamp": "2026-11-28T08:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7d9f8b6c5d", "tier": "frontend"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-27T10:00:00Z"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-7d9f8b6c5d",
                    "uid": "9a8b7c6d-5e4f-3a2b-1c0d-000000000001",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-11-28T08:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {"f:generateName": {}, "f:labels": {"f:app": {}}},
                        "f:spec": {"f:containers": {'k:{"name":"web"}': {"f:env": {}}}},
                    },
                },
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-11-28T08:00:05Z",
                    "fieldsType": "FieldsV1",
                    "subresource": "status",
                    "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}}},
                },
            ],
        },
        "spec": {
            "schedulerName": "volcano",
            "nodeName": f"node-{i % 5000:05d}",
            "priority": 0,
            "containers": [
                {
                    "name": "web",
                    "image": "registry.example.com/shop/web:1.42.0",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "env": env,
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "256Mi"},
                        "limits": {"cpu": "1", "memory": "512Mi"},
                    },
                    "volumeMounts": [
                        {
                            "name": "kube-api-access-abcde",
                            "readOnly": True,
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        }
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "securityContext": {},
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "volumes": [
                {
                    "name": "kube-api-access-abcde",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                }
            ],
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": "2026-11-28T08:00:05Z"}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "hostIP": "10.0.0.1",
            "podIP": f"10.1.{i // 250 % 250}.{i % 250}",
            "startTime": "2026-11-28T08:00:01Z",
            "containerStatuses": [
                {
                    "name": "web",
                    "state": {"running": {"startedAt": "2026-11-28T08:00:04Z"}},
                    "ready": True,
                    "restartCount": 0,
                    "image": "registry.example.com/shop/web:1.42.0",
                    "imageID": "registry.example.com/shop/web@sha256:" + "a" * 64,
                    "containerID": "containerd://" + "b" * 64,
                    "started": True,
                }
            ],
            "qosClass": "Burstable",
        },
    }


def thin_pod(i: int) -> dict[str, Any]:
    """The operator benchmark's running pod."""
    obj = api.pod(f"run-{i}", "heap", node_name=f"node-{i % 5000:05d}")
    obj["metadata"].update(uid=f"uid-{i}", creationTimestamp="2026-01-01T00:00:00Z")
    return obj


# -- measuring ----------------------------------------------------------------------------------

DECODERS: dict[str, Callable[[bytes], object]] = {
    "record": Pod.model_validate_json,
    "record from dict": lambda raw: Pod.model_validate(orjson.loads(raw)),
    "orjson": orjson.loads,
}


def measure(raw: list[bytes], decode: Callable[[bytes], object]) -> tuple[float, float]:
    """(microseconds per pod to decode, bytes held per pod)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    kept = [decode(text) for text in raw]
    spent = time.perf_counter() - start
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del kept
    # the timing above ran under tracemalloc: time again without it
    start = time.perf_counter()
    again = [decode(text) for text in raw]
    spent = min(spent, time.perf_counter() - start)
    del again
    return spent / len(raw) * 1e6, held / len(raw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=20_000)
    args = parser.parse_args()
    for shape, make in (("real pod", real_pod), ("benchmark pod", thin_pod)):
        raw = [orjson.dumps(make(i)) for i in range(args.pods)]
        size = sum(map(len, raw)) / len(raw)
        print(f"{shape} ({size:,.0f} bytes of JSON), {args.pods:,} pods:")
        for name, decode in DECODERS.items():
            micros, held = measure(raw, decode)
            print(f"  {name:>16}: {micros:6.1f} µs to decode, {held:8,.0f} bytes held per pod")


if __name__ == "__main__":
    main()
