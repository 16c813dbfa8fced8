"""Loading manifests: the formats people feed the simulator, and what happens to bad input.

Every object is validated on its own; anything skipped is reported in ``Loaded.warnings`` (kinds
the scheduler does not use in ``Loaded.notes``) and the rest still loads. An input that cannot be
read at all is in ``Loaded.errors``.
"""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest

from caldera.simulate.manifests import EPOCH, load_manifests

POD_A = """\
apiVersion: v1
kind: Pod
metadata: {name: a}
spec:
  containers: [{name: main, resources: {requests: {cpu: 500m}}}]
"""
POD_B = POD_A.replace("name: a", "name: b")
NODE = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi}}
"""
QUEUE = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: q}
spec: {weight: 2}
"""


def write(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


def docs(*texts: str) -> str:
    return "---\n".join(texts)


def test_multi_document_yaml(tmp_path: Path) -> None:
    loaded = load_manifests([write(tmp_path, "all.yaml", docs(POD_A, NODE, QUEUE, POD_B))])
    assert loaded.warnings == []
    assert sorted(loaded.state.pods) == ["default/a", "default/b"]
    assert list(loaded.state.nodes) == ["n1"]
    assert loaded.state.queues["q"].spec.weight == 2
    assert loaded.state.pods["default/a"].spec.containers[0].resources.requests == {"cpu": 500.0}


@pytest.mark.parametrize(
    ("text", "warnings", "pods", "nodes"),
    [
        pytest.param(
            """\
            apiVersion: v1
            kind: List
            metadata: {resourceVersion: ""}
            items:
            - apiVersion: v1
              kind: Node
              metadata: {name: n1}
            - apiVersion: v1
              kind: Pod
              metadata: {name: a, namespace: ml}
              spec: {containers: [{name: main}]}
            """,
            [],
            ["ml/a"],
            ["n1"],
            id="a kind List as kubectl get prints it",
        ),
        pytest.param(
            """\
            apiVersion: v1
            kind: NodeList
            items:
            - {kind: Node, metadata: {name: n1}}
            - {kind: Node, metadata: {name: n2}}
            """,
            [],
            [],
            ["n1", "n2"],
            id="a typed list as the API returns it",
        ),
        pytest.param(
            "kind: List\nitems: []\n", [], [], [], id="an empty list loads nothing quietly"
        ),
        pytest.param(
            "---\n" + POD_A + "---\n---\n" + POD_B + "---\n",
            [],
            ["default/a", "default/b"],
            [],
            id="empty documents between objects are skipped",
        ),
        pytest.param(
            docs("just a string\n", "[1, 2]\n", POD_A),
            ["skipped a document that is not an object"] * 2,
            ["default/a"],
            [],
            id="documents that are not objects are skipped with a warning",
        ),
        pytest.param(
            docs("kind: List\nitems: 7\n", POD_A),
            ["skipped a List whose items are not a list"],
            ["default/a"],
            [],
            id="a List whose items are not a list is skipped with a warning",
        ),
        pytest.param(
            docs(POD_A, "a: " + "[" * 5000),
            ["invalid YAML: nested too deeply; rest of the file skipped"],
            ["default/a"],
            [],
            id="YAML nested too deeply is reported, not raised",
        ),
        pytest.param(
            docs(POD_A, POD_A.replace("name: a", "name: broken").replace("500m", "lots"), POD_B),
            [
                (
                    "Pod default/broken: spec.containers[0].resources.requests: cpu: "
                    "invalid quantity 'lots'; skipped"
                )
            ],
            ["default/a", "default/b"],
            [],
            id="a malformed object is reported and the rest loads",
        ),
        pytest.param(
            docs(POD_A, POD_A.replace("{name: a}", "{name: a, namespace: default}")),
            ["Pod default/a appears twice; the last one is used"],
            ["default/a"],
            [],
            id="a pod without namespace duplicates one in default",
        ),
        pytest.param(
            docs(POD_A, POD_A.replace("{name: a}", "{name: a, namespace: ml}")),
            [],
            ["default/a", "ml/a"],
            [],
            id="the same name in different namespaces is not a duplicate",
        ),
    ],
)
def test_what_one_file_loads_and_what_it_warns_of(
    tmp_path: Path, text: str, warnings: list[str], pods: list[str], nodes: list[str]
) -> None:
    path = write(tmp_path, "manifests.yaml", text)
    loaded = load_manifests([path])
    assert loaded.warnings == [f"{path}: {warning}" for warning in warnings]
    assert sorted(loaded.state.pods) == pods
    assert sorted(loaded.state.nodes) == nodes


DRA_CLASS = "{selectors: [{cel: {expression: x}}]}"
DRA_CLAIM = "{devices: {requests: [{name: g, exactly: {deviceClassName: gpu}}]}}"
DRA_SLICE = "{driver: d, pool: {name: p}, nodeName: n1, devices: [{name: g0}]}"


@pytest.mark.parametrize(
    ("texts", "expected", "warning"),
    [
        pytest.param(
            [
                "kind: PersistentVolume\nmetadata: {name: pv1}\nspec: {capacity: {storage: 1Gi}}",
                "kind: PersistentVolumeClaim\nmetadata: {name: data}\nspec: {volumeName: pv1}",
                "kind: StorageClass\nmetadata: {name: local}\nprovisioner: x",
                "kind: CSINode\nmetadata: {name: n1}\nspec: {drivers: [{name: d}]}",
                "kind: PersistentVolume\nmetadata: {name: bad}\nspec: {capacity: {storage: lots}}",
            ],
            {
                "persistent_volumes": ["pv1"],
                "persistent_volume_claims": ["default/data"],
                "storage_classes": ["local"],
                "csi_nodes": ["n1"],
            },
            "PersistentVolume bad: spec.capacity: storage: invalid quantity",
            id="the storage kinds (VolumeBinding's)",
        ),
        pytest.param(
            [
                f"kind: DeviceClass\nmetadata: {{name: gpu}}\nspec: {DRA_CLASS}",
                f"kind: ResourceClaim\nmetadata: {{name: c}}\nspec: {DRA_CLAIM}",
                "kind: ResourceClaimTemplate\nmetadata: {name: t}\nspec: {spec: {devices: {}}}",
                f"kind: ResourceSlice\nmetadata: {{name: s}}\nspec: {DRA_SLICE}",
                "kind: ResourceSlice\nmetadata: {name: bad}\nspec: {pool: {name: p}}",
            ],
            {
                "device_classes": ["gpu"],
                "resource_claims": ["default/c"],
                "resource_claim_templates": ["default/t"],
                "resource_slices": ["s"],
            },
            "ResourceSlice bad: spec.driver: Field required",
            id="the DRA kinds (DynamicResources')",
        ),
    ],
)
def test_each_kind_loads_into_its_own_collection_and_a_bad_one_is_warned_of(
    tmp_path: Path, texts: list[str], expected: dict[str, list[str]], warning: str
) -> None:
    path = write(tmp_path, "manifests.yaml", "\n---\n".join(texts))
    loaded = load_manifests([path])
    assert {kind: list(getattr(loaded.state, kind)) for kind in expected} == expected
    assert len(loaded.warnings) == 1
    assert warning in loaded.warnings[0]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="an empty file"),
        pytest.param("---\n---\n", id="only separators"),
        pytest.param("# just a comment\n", id="only a comment"),
        pytest.param("---\n# nothing\n---\n", id="separators and comments"),
    ],
)
def test_empty_documents_are_skipped_quietly(tmp_path: Path, text: str) -> None:
    loaded = load_manifests([write(tmp_path, "empty.yaml", text)])
    assert loaded.warnings == []
    assert loaded.state.pods == {}
    assert loaded.state.nodes == {}


def test_a_directory_loads_its_yaml_files_in_name_order(tmp_path: Path) -> None:
    write(tmp_path, "b.yml", POD_B)
    write(tmp_path, "a.yaml", POD_A)
    write(tmp_path, "c.yaml", NODE)
    write(tmp_path, "notes.txt", "kind: Pod\nthis is not: [yaml")
    write(tmp_path, "pod.json.bak", POD_A.replace("name: a", "name: backup"))
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", "nested.yaml", POD_A.replace("name: a", "name: nested"))
    loaded = load_manifests([str(tmp_path)])
    assert loaded.warnings == []
    # Insertion order of the store follows load order: a.yaml before b.yml.
    assert list(loaded.state.pods) == ["default/a", "default/b"]
    assert list(loaded.state.nodes) == ["n1"]
    a = loaded.state.pods["default/a"].metadata.creation_timestamp
    b = loaded.state.pods["default/b"].metadata.creation_timestamp
    assert a is not None and b is not None and a < b


def test_stdin_is_read_for_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(docs(POD_A, NODE)))
    loaded = load_manifests(["-"])
    assert loaded.warnings == []
    assert list(loaded.state.pods) == ["default/a"]
    assert list(loaded.state.nodes) == ["n1"]


def test_stdin_and_files_combine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(POD_B))
    loaded = load_manifests([write(tmp_path, "a.yaml", POD_A), "-"])
    assert list(loaded.state.pods) == ["default/a", "default/b"]


def test_warnings_from_stdin_name_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("kind: Secret\nmetadata: {name: web}\n"))
    loaded = load_manifests(["-"])
    assert loaded.notes == ["<stdin>: ignored Secret web: kind not used by the scheduler"]


def test_unknown_kinds_are_ignored_with_a_note_and_objects_without_kind_are_problems(
    tmp_path: Path,
) -> None:
    text = docs(
        "kind: Deployment\nmetadata: {name: web, namespace: shop}\n",
        POD_A,
        "kind: Secret\nmetadata: {name: settings}\n",
        "metadata: {name: kindless}\n",
    )
    path = write(tmp_path, "mixed.yaml", text)
    loaded = load_manifests([path])
    assert loaded.notes == [
        f"{path}: ignored Deployment shop/web: kind not used by the scheduler",
        f"{path}: ignored Secret settings: kind not used by the scheduler",
    ]
    assert loaded.warnings == [
        f"{path}: skipped an object without kind kindless: kind must be a non-empty string"
    ]
    assert list(loaded.state.pods) == ["default/a"]


def test_malformed_yaml_is_reported_with_its_line_and_other_files_still_load(
    tmp_path: Path,
) -> None:
    bad = write(tmp_path, "bad.yaml", "kind: Pod\nmetadata:\n  name: [unclosed\n")
    good = write(tmp_path, "good.yaml", POD_A)
    loaded = load_manifests([bad, good])
    assert len(loaded.warnings) == 1
    assert loaded.warnings[0].startswith(f"{bad}: invalid YAML at line 4: ")
    assert list(loaded.state.pods) == ["default/a"]


def test_documents_before_a_yaml_error_still_load(tmp_path: Path) -> None:
    text = docs(POD_A, NODE, "kind: Pod\nmetadata: {name: [oops}\n", POD_B)
    path = write(tmp_path, "partial.yaml", text)
    loaded = load_manifests([path])
    assert len(loaded.warnings) == 1
    warning = loaded.warnings[0]
    assert warning.startswith(f"{path}: invalid YAML at line 13: ")
    assert warning.endswith("; rest of the file skipped")
    assert list(loaded.state.pods) == ["default/a"]
    assert list(loaded.state.nodes) == ["n1"]


def test_a_tab_indented_file_is_reported_not_raised(tmp_path: Path) -> None:
    path = write(tmp_path, "tabs.yaml", "kind: Pod\nmetadata:\n\tname: a\n")
    loaded = load_manifests([path])
    assert len(loaded.warnings) == 1
    assert loaded.warnings[0].startswith(f"{path}: invalid YAML at line 3: ")


def test_a_missing_file_is_an_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.yaml")
    loaded = load_manifests([missing, write(tmp_path, "a.yaml", POD_A)])
    assert loaded.errors == [f"{missing}: no such file or directory"]
    assert loaded.warnings == []


def test_a_directory_without_yaml_files_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("kind: Node\n")
    loaded = load_manifests([str(tmp_path)])
    assert loaded.errors == [f"{tmp_path}: no *.yaml or *.yml file in this directory"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"\xff\xfe\x00kind", "not a text file (not UTF-8)", id="not UTF-8"),
        pytest.param(
            b"kind: Node\x00\x01",
            "not a text file (character #x0000 at position 10)",
            id="control bytes",
        ),
    ],
)
def test_a_file_that_is_not_text_is_an_error(tmp_path: Path, content: bytes, message: str) -> None:
    binary = tmp_path / "image.yaml"
    binary.write_bytes(content)
    loaded = load_manifests([str(binary), write(tmp_path, "a.yaml", POD_A)])
    assert loaded.errors == [f"{binary}: {message}"]


def test_a_malformed_node_inside_a_list_is_reported_and_the_rest_loads(tmp_path: Path) -> None:
    text = """\
    kind: List
    items:
    - {kind: Node, metadata: {name: n1}, spec: {taints: [{key: k, effect: Never}]}}
    - {kind: Node, metadata: {name: n2}}
    """
    path = write(tmp_path, "nodes.yaml", text)
    loaded = load_manifests([path])
    assert len(loaded.warnings) == 1
    assert loaded.warnings[0].startswith(f"{path}: Node n1: spec.taints[0].effect: ")
    assert list(loaded.state.nodes) == ["n2"]


def test_duplicates_are_warned_and_the_last_one_wins(tmp_path: Path) -> None:
    first = write(tmp_path, "1.yaml", docs(POD_A, QUEUE))
    second = write(tmp_path, "2.yaml", docs(POD_A.replace("500m", "2"), QUEUE.replace("2}", "5}")))
    loaded = load_manifests([first, second])
    assert loaded.warnings == [
        f"{second}: Pod default/a appears twice; the last one is used",
        f"{second}: Queue q appears twice; the last one is used",
    ]
    assert loaded.state.pods["default/a"].spec.containers[0].resources.requests == {"cpu": 2000.0}
    assert loaded.state.queues["q"].spec.weight == 5


def test_objects_without_creation_time_are_stamped_in_file_order(tmp_path: Path) -> None:
    pods = [POD_A.replace("name: a", f"name: p{i}") for i in range(4)]
    first = write(tmp_path, "1.yaml", docs(*pods[:2]))
    second = write(tmp_path, "2.yaml", docs(*pods[2:]))
    loaded = load_manifests([first, second])
    stamps = [loaded.state.pods[f"default/p{i}"].metadata.creation_timestamp for i in range(4)]
    assert stamps == [EPOCH + i / 1000 for i in range(4)]


def test_every_kind_shares_one_creation_order(tmp_path: Path) -> None:
    loaded = load_manifests([write(tmp_path, "all.yaml", docs(QUEUE, NODE, POD_A))])
    assert loaded.state.queues["q"].metadata.creation_timestamp == EPOCH
    assert loaded.state.nodes["n1"].metadata.creation_timestamp == EPOCH + 1 / 1000
    assert loaded.state.pods["default/a"].metadata.creation_timestamp == EPOCH + 2 / 1000


def test_a_stated_creation_time_is_kept(tmp_path: Path) -> None:
    stamped = POD_B.replace(
        "metadata: {name: b}", "metadata: {name: b, creationTimestamp: '2020-01-01T00:00:00Z'}"
    )
    loaded = load_manifests([write(tmp_path, "pods.yaml", docs(POD_A, stamped))])
    assert loaded.state.pods["default/b"].metadata.creation_timestamp == 1_577_836_800.0
    assert loaded.state.pods["default/a"].metadata.creation_timestamp == EPOCH


def test_an_unquoted_yaml_timestamp_is_understood(tmp_path: Path) -> None:
    # PyYAML turns an unquoted timestamp into a datetime; it must mean the same instant.
    stamped = POD_A.replace(
        "metadata: {name: a}", "metadata: {name: a, creationTimestamp: 2020-01-01T00:00:00Z}"
    )
    loaded = load_manifests([write(tmp_path, "pod.yaml", stamped)])
    assert loaded.state.pods["default/a"].metadata.creation_timestamp == 1_577_836_800.0


def test_the_epoch_is_fixed_so_runs_are_reproducible() -> None:
    assert EPOCH == 1_735_689_600.0  # 2025-01-01T00:00:00Z
