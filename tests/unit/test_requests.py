"""Pod resource requests, computed as kube-scheduler computes them.

The reference is ``PodRequests`` in k8s.io/component-helpers ``resource/helpers.go``:

* app containers are summed;
* init containers run one at a time, so the pod needs the largest of them; a restartable init
  container (a sidecar, ``restartPolicy: Always``) keeps running, so it is added to the app sum and
  to every init container that starts after it (KEP-753: ``InitContainerUse(i) = sum(sidecars
  before i) + init container i``);
* pod overhead is added on top;
* the API server's defaulting makes a resource that has only a limit request that limit.

``nonzero_requests`` is the same computation with ``NonMissingContainerRequests`` set to
kube-scheduler's defaults (100m cpu, 200Mi memory) for containers that state no request; an explicit
zero is kept. Engine units: cpu in millicores, everything else in whole units (bytes, counts).
"""

from __future__ import annotations

from typing import Any

import pytest

from caldera.models.core import PodSpec, effective_requests, nonzero_requests

MI = 1024.0**2
GI = 1024.0**3
DEFAULT_CPU = 100.0
DEFAULT_MEMORY = 200 * MI


def c(
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    *,
    sidecar: bool = False,
) -> dict[str, Any]:
    """A raw container; ``sidecar`` makes it a restartable init container."""
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    out: dict[str, Any] = {"name": "c", "image": "busybox", "resources": resources}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def spec(
    *containers: dict[str, Any],
    init: tuple[dict[str, Any], ...] = (),
    overhead: dict[str, str] | None = None,
) -> PodSpec:
    raw: dict[str, Any] = {"containers": list(containers), "initContainers": list(init)}
    if overhead is not None:
        raw["overhead"] = overhead
    return PodSpec.model_validate(raw)


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(
            spec(c({"cpu": "1", "memory": "1Gi"})),
            {"cpu": 1000.0, "memory": GI},
            id="a single container requests what it states",
        ),
        pytest.param(
            spec(c({"cpu": "500m", "memory": "1Gi"}), c({"cpu": "250m", "memory": "512Mi"})),
            {"cpu": 750.0, "memory": 1.5 * GI},
            id="app containers are summed",
        ),
        pytest.param(
            spec(c({"cpu": "1"}), c({"memory": "1Gi"})),
            {"cpu": 1000.0, "memory": GI},
            id="containers asking for different resources add up per resource",
        ),
        pytest.param(spec(c()), {}, id="a container without requests asks for nothing"),
        pytest.param(
            spec(c({"cpu": "0"})),
            {"cpu": 0.0},
            id="an explicit zero request is kept as zero",
        ),
    ],
)
def test_app_containers(pod: PodSpec, expected: dict[str, float]) -> None:
    assert effective_requests(pod) == expected


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(
            spec(c({"cpu": "1"}), init=(c({"cpu": "2"}),)),
            {"cpu": 2000.0},
            id="an init container larger than the app sum sets the request",
        ),
        pytest.param(
            spec(c({"cpu": "2"}), init=(c({"cpu": "1"}),)),
            {"cpu": 2000.0},
            id="an init container smaller than the app sum changes nothing",
        ),
        pytest.param(
            spec(c({"cpu": "2", "memory": "1Gi"}), init=(c({"cpu": "1", "memory": "4Gi"}),)),
            {"cpu": 2000.0, "memory": 4 * GI},
            id="the maximum is taken per resource",
        ),
        pytest.param(
            spec(c({"cpu": "1"}), init=(c({"cpu": "2"}), c({"cpu": "3"}))),
            {"cpu": 3000.0},
            id="regular init containers run one at a time so only the largest counts",
        ),
        pytest.param(
            spec(
                c({"cpu": "500m", "memory": "1Gi"}),
                c({"cpu": "200m", "memory": "512Mi"}),
                init=(c({"cpu": "1", "memory": "2Gi"}), c({"cpu": "2", "memory": "4Gi"})),
            ),
            {"cpu": 2000.0, "memory": 4 * GI},
            id="two app containers and two init containers take the larger phase",
        ),
        pytest.param(
            spec(c({"cpu": "1"}), init=(c({"memory": "1Gi"}),)),
            {"cpu": 1000.0, "memory": GI},
            id="a resource only an init container asks for is requested",
        ),
        pytest.param(
            spec(c(), init=(c({"nvidia.com/gpu": "1"}),)),
            {"nvidia.com/gpu": 1.0},
            id="an init container's extended resource is requested",
        ),
    ],
)
def test_init_containers(pod: PodSpec, expected: dict[str, float]) -> None:
    assert effective_requests(pod) == expected


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(
            spec(c({"cpu": "1"}), init=(c({"cpu": "500m"}, sidecar=True),)),
            {"cpu": 1500.0},
            id="a sidecar is added to the app containers",
        ),
        pytest.param(
            spec(c({"cpu": "1"}), init=(c({"cpu": "1"}, sidecar=True), c({"cpu": "2"}))),
            {"cpu": 3000.0},
            id="a sidecar runs alongside the init containers after it",
        ),
        pytest.param(
            spec(c({"cpu": "1"}), init=(c({"cpu": "5"}), c({"cpu": "1"}, sidecar=True))),
            {"cpu": 5000.0},
            id="an init container before the sidecar runs without it",
        ),
        pytest.param(
            spec(
                c({"cpu": "1"}),
                init=(
                    c({"cpu": "1"}, sidecar=True),
                    c({"cpu": "1"}, sidecar=True),
                    c({"cpu": "3"}),
                ),
            ),
            {"cpu": 5000.0},
            id="every earlier sidecar runs alongside a later init container",
        ),
        pytest.param(
            spec(
                c({"cpu": "1"}),
                init=(
                    c({"cpu": "2"}, sidecar=True),
                    c({"cpu": "1"}),
                    c({"cpu": "500m"}, sidecar=True),
                ),
            ),
            {"cpu": 3500.0},
            id="sidecars on both sides of an init container all join the app sum",
        ),
        pytest.param(
            spec(
                c({"cpu": "1"}),
                init=(c({"cpu": "3"}, sidecar=True), c({"cpu": "500m"})),
            ),
            {"cpu": 4000.0},
            id="the app phase wins when the sidecar plus apps exceed the init phase",
        ),
        pytest.param(
            spec(
                c({"cpu": "100m", "memory": "100Mi"}),
                init=(
                    c({"cpu": "50m", "memory": "50Mi"}, sidecar=True),
                    c({"cpu": "1", "memory": "1Gi"}),
                ),
            ),
            {"cpu": 1050.0, "memory": GI + 50 * MI},
            id="a heavy init step after a light sidecar needs both at once",
        ),
        pytest.param(
            spec(c(), init=(c({"cpu": "1"}, sidecar=True),)),
            {"cpu": 1000.0},
            id="a sidecar's request counts even when the apps ask for nothing",
        ),
    ],
)
def test_sidecars(pod: PodSpec, expected: dict[str, float]) -> None:
    assert effective_requests(pod) == expected


def test_an_app_container_with_restart_policy_is_not_treated_as_a_sidecar() -> None:
    # restartPolicy on an app container does not make it a sidecar: it is simply summed.
    pod = spec(c({"cpu": "1"}, sidecar=True), init=(c({"cpu": "3"}),))
    assert effective_requests(pod) == {"cpu": 3000.0}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(
            spec(c({"cpu": "1"}), overhead={"cpu": "250m"}),
            {"cpu": 1250.0},
            id="overhead is added to the app containers",
        ),
        pytest.param(
            spec(c({"cpu": "1"}), init=(c({"cpu": "3"}),), overhead={"cpu": "250m"}),
            {"cpu": 3250.0},
            id="overhead is added after the init maximum",
        ),
        pytest.param(
            spec(c({"cpu": "1"}), overhead={"memory": "120Mi"}),
            {"cpu": 1000.0, "memory": 120 * MI},
            id="overhead of a resource no container asks for is still requested",
        ),
        pytest.param(
            spec(
                c({"cpu": "1"}),
                init=(c({"cpu": "1"}, sidecar=True), c({"cpu": "2"})),
                overhead={"cpu": "100m"},
            ),
            {"cpu": 3100.0},
            id="overhead is added on top of a sidecar-inflated init phase",
        ),
    ],
)
def test_overhead(pod: PodSpec, expected: dict[str, float]) -> None:
    assert effective_requests(pod) == expected


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(
            spec(c(limits={"cpu": "2", "memory": "1Gi"})),
            {"cpu": 2000.0, "memory": GI},
            id="limits without requests become the requests",
        ),
        pytest.param(
            spec(c({"cpu": "1"}, {"cpu": "2"})),
            {"cpu": 1000.0},
            id="a stated request wins over the limit",
        ),
        pytest.param(
            spec(c({"cpu": "1"}, {"memory": "1Gi"})),
            {"cpu": 1000.0, "memory": GI},
            id="defaulting is per resource",
        ),
        pytest.param(
            spec(c({"cpu": "0"}, {"cpu": "2"})),
            {"cpu": 0.0},
            id="an explicit zero request is not replaced by the limit",
        ),
        pytest.param(
            spec(c({"cpu": "1"}), init=(c(limits={"cpu": "3"}),)),
            {"cpu": 3000.0},
            id="init containers are defaulted from their limits too",
        ),
        pytest.param(
            spec(c({"cpu": "1"}), init=(c(limits={"cpu": "500m"}, sidecar=True),)),
            {"cpu": 1500.0},
            id="sidecars are defaulted from their limits too",
        ),
    ],
)
def test_limits_default_requests(pod: PodSpec, expected: dict[str, float]) -> None:
    assert effective_requests(pod) == expected


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(
            spec(c(limits={"nvidia.com/gpu": "1"})),
            {"nvidia.com/gpu": 1.0},
            id="a GPU stated only as a limit is requested",
        ),
        pytest.param(
            spec(c(limits={"nvidia.com/gpu": "1"}), c(limits={"nvidia.com/gpu": "2"})),
            {"nvidia.com/gpu": 3.0},
            id="GPUs of app containers are summed",
        ),
        pytest.param(
            spec(c(limits={"nvidia.com/gpu": "1"}), init=(c(limits={"nvidia.com/gpu": "4"}),)),
            {"nvidia.com/gpu": 4.0},
            id="an init container needing more GPUs sets the request",
        ),
        pytest.param(
            spec(
                c({"cpu": "1", "hugepages-2Mi": "4Mi", "ephemeral-storage": "1Gi"}),
            ),
            {"cpu": 1000.0, "hugepages-2Mi": 4 * MI, "ephemeral-storage": GI},
            id="huge pages and ephemeral storage are requested in bytes",
        ),
    ],
)
def test_extended_resources(pod: PodSpec, expected: dict[str, float]) -> None:
    assert effective_requests(pod) == expected


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(
            spec(c()),
            (DEFAULT_CPU, DEFAULT_MEMORY),
            id="a container without requests counts 100m and 200Mi",
        ),
        pytest.param(
            spec(c(), c()),
            (2 * DEFAULT_CPU, 2 * DEFAULT_MEMORY),
            id="the defaults apply per container",
        ),
        pytest.param(
            spec(c({"cpu": "500m"})),
            (500.0, DEFAULT_MEMORY),
            id="only the missing resource is defaulted",
        ),
        pytest.param(
            spec(c({"memory": "1Gi"})),
            (DEFAULT_CPU, GI),
            id="a memory-only container counts the default cpu",
        ),
        pytest.param(
            spec(c({"cpu": "0"})),
            (0.0, DEFAULT_MEMORY),
            id="an explicit zero cpu stays zero",
        ),
        pytest.param(
            spec(c({"cpu": "0", "memory": "0"})),
            (0.0, 0.0),
            id="explicit zeros for both stay zero",
        ),
        pytest.param(
            spec(c(limits={"cpu": "2"})),
            (2000.0, DEFAULT_MEMORY),
            id="a limit counts as the request before defaulting",
        ),
        pytest.param(
            spec(c({"cpu": "1", "memory": "1Gi"}), c()),
            (1000.0 + DEFAULT_CPU, GI + DEFAULT_MEMORY),
            id="a container with requests plus one without",
        ),
        pytest.param(
            spec(c({"nvidia.com/gpu": "1"})),
            (DEFAULT_CPU, DEFAULT_MEMORY),
            id="a GPU-only container still counts the cpu and memory defaults",
        ),
    ],
)
def test_nonzero_requests_for_app_containers(pod: PodSpec, expected: tuple[float, float]) -> None:
    assert nonzero_requests(pod) == expected


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(
            spec(c({"cpu": "1", "memory": "1Gi"}), init=(c(),)),
            (1000.0, GI),
            id="a defaulted init container smaller than the apps changes nothing",
        ),
        pytest.param(
            spec(c({"cpu": "50m", "memory": "50Mi"}), init=(c(),)),
            (DEFAULT_CPU, DEFAULT_MEMORY),
            id="an init container without requests counts the defaults in the init phase",
        ),
        pytest.param(
            spec(c(), init=(c(sidecar=True),)),
            (2 * DEFAULT_CPU, 2 * DEFAULT_MEMORY),
            id="a sidecar without requests adds the defaults to the app sum",
        ),
        pytest.param(
            spec(c(), init=(c(sidecar=True), c({"cpu": "1", "memory": "1Gi"}))),
            (1000.0 + DEFAULT_CPU, GI + DEFAULT_MEMORY),
            id="a defaulted sidecar runs alongside a later init container",
        ),
        pytest.param(
            spec(c(), overhead={"cpu": "250m", "memory": "64Mi"}),
            (DEFAULT_CPU + 250.0, DEFAULT_MEMORY + 64 * MI),
            id="overhead is added to the defaults",
        ),
        pytest.param(
            spec(c({"cpu": "0", "memory": "0"}), overhead={"cpu": "250m"}),
            (250.0, 0.0),
            id="overhead is added to explicit zeros",
        ),
    ],
)
def test_nonzero_requests_with_init_containers_and_overhead(
    pod: PodSpec, expected: tuple[float, float]
) -> None:
    assert nonzero_requests(pod) == expected


def test_effective_requests_do_not_apply_the_scoring_defaults() -> None:
    pod = spec(c(), init=(c(sidecar=True),))
    assert effective_requests(pod) == {}
    assert nonzero_requests(pod) == (2 * DEFAULT_CPU, 2 * DEFAULT_MEMORY)


def test_pod_level_requests_replace_the_container_aggregate_for_cpu_and_memory() -> None:
    from caldera.models.core import Pod

    pod = Pod.model_validate(
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "resources": {"requests": {"cpu": "2", "memory": "1Gi"}},
                "overhead": {"cpu": "100m"},
                "containers": [
                    {
                        "name": "a",
                        "resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": "1"}},
                    },
                    {"name": "b"},
                ],
            },
        }
    )
    assert effective_requests(pod.spec) == {
        "cpu": 2100.0,
        "memory": 1024.0**3,
        "nvidia.com/gpu": 1.0,
    }
    assert nonzero_requests(pod.spec) == (2100.0, 1024.0**3)
