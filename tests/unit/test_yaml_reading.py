"""Reading big manifest inputs fast changes nothing that comes out.

With libyaml or without it, one file at a time or in worker processes, the same objects load and
a bad file is reported in the same words, at the same line, after the same documents.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from caldera.simulate import reading, yaml_load
from caldera.simulate.manifests import Loaded, load_manifests
from caldera.simulate.yaml_load import load_documents

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

needs_libyaml = pytest.mark.skipif(
    yaml_load._C_LOADER is None, reason="PyYAML was installed without libyaml"
)

UNCOMMON = """\
base: &base {cpu: "1", labels: [a, b]}
again: *base
merged: {<<: *base, memory: 1Gi}
set: !!set {p, q}
ordered: !!omap [{a: 1}, {b: 2}]
when: 2001-12-14t21:59:43.10-05:00
words: [yes, no, on, off, ~, null, "null", '12', !!str 12]
numbers: [0o17, 0x1f, 1_000, 1.5e3, .inf, 012, 1:30, -7]
bytes: !!binary aGVsbG8=
---
- plain
- |
  block
---
"""

BROKEN = {
    "mapping in a plain value": "kind: Pod\nmetadata: {name: a}\nspec: c: d\n",
    "unclosed flow sequence": "kind: Pod\nmetadata:\n  name: [unclosed\n",
    "tab indentation": "kind: Pod\nmetadata:\n\tname: a\n",
    "unknown tag": "kind: Pod\nmetadata: !Ref x\n",
    "collection as a key": "kind: Pod\n? [1, 2]\n: v\n",
    "a scalar its tag cannot hold": "kind: Pod\nspec: {priority: !!int high}\n",
}


def both_loaders(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> list[tuple[list[Any], str | None, bool]]:
    """``load_documents`` with libyaml, then with the pure-Python loader only."""
    fast = load_documents("f.yaml", text)
    monkeypatch.setattr(yaml_load, "_C_LOADER", None)
    slow = load_documents("f.yaml", text)
    monkeypatch.undo()
    return [fast, slow]


@needs_libyaml
def test_both_loaders_build_what_safe_load_all_builds_for_uncommon_yaml(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = list(yaml.safe_load_all(UNCOMMON))
    for docs, problem, _ in both_loaders(monkeypatch, UNCOMMON):
        assert problem is None
        assert repr(docs) == repr(expected)  # repr: also tells 1 from 1.0 and True from 1
        assert docs[0]["again"] is docs[0]["base"]  # an alias is the same object


@needs_libyaml
def test_both_loaders_build_the_same_objects_from_the_examples(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        fast, slow = both_loaders(monkeypatch, text)
        assert fast == slow == (list(yaml.safe_load_all(text)), None, False), path


def test_a_document_that_contains_itself_loads_as_safe_load_all_builds_it() -> None:
    (doc,), problem, _ = load_documents("f.yaml", "loop: &l [1, *l]\n")
    assert problem is None
    assert doc["loop"][0] == 1
    assert doc["loop"][1] is doc["loop"]


@needs_libyaml
@pytest.mark.parametrize("text", list(BROKEN.values()), ids=list(BROKEN))
def test_a_yaml_error_reads_the_same_with_or_without_libyaml(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    good = "kind: Node\nmetadata: {name: n1}\n"
    fast, slow = both_loaders(monkeypatch, f"{good}---\n{text}")
    assert fast == slow
    docs, problem, _ = fast
    assert docs == [yaml.safe_load(good)]
    assert isinstance(problem, str)
    assert problem.startswith("f.yaml: invalid YAML")
    assert problem.endswith("; rest of the file skipped")


@pytest.mark.parametrize(
    ("broken", "words"),
    [
        pytest.param(
            "mapping in a plain value",
            "invalid YAML at line 3: mapping values are not allowed here",
            id="the words of a YAML error are PyYAML's, with the line",
        ),
        pytest.param(
            "a scalar its tag cannot hold",
            "invalid YAML: invalid literal for int() with base 10: 'high'",
            id="a scalar its tag cannot hold is reported, not raised",
        ),
    ],
)
def test_a_yaml_error_is_one_problem_in_pyyamls_words(broken: str, words: str) -> None:
    _, problem, _ = load_documents("f.yaml", BROKEN[broken])
    assert problem == f"f.yaml: {words}; rest of the file skipped"


def test_a_files_yaml_error_is_reported_after_the_problems_of_its_documents(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text(
        "kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: "
        "{requests: {cpu: lots}}}]}\n---\nkind: Pod\nmetadata: {name: [b\n"
    )
    warnings = load_manifests([str(path)]).warnings
    assert [w.split(": ")[1] for w in warnings] == ["Pod default/a", "invalid YAML at line 7"]


def many_files(tmp_path: Path) -> list[str]:
    """Pods over several files, one file with a malformed object, one cut short by bad YAML."""
    files = []
    for f in range(4):
        docs = [
            f"kind: Pod\nmetadata: {{name: p{f}-{i}, namespace: ns{f}}}\n"
            "spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}\n"
            for i in range(5)
        ]
        if f == 1:
            docs[2] = docs[2].replace("100m", "lots")
        if f == 2:
            docs[3] = "kind: Pod\nmetadata: {name: [cut\n"
        path = tmp_path / f"{f}.yaml"
        path.write_text("---\n".join(docs))
        files.append(str(path))
    return [*files, str(tmp_path / "missing.yaml")]


def summary(loaded: Loaded) -> tuple[object, ...]:
    pods = loaded.state.pods
    return (
        list(pods),
        [p.metadata.creation_timestamp for p in pods.values()],
        loaded.warnings,
        loaded.errors,
    )


def test_files_parsed_by_worker_processes_load_as_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = many_files(tmp_path)
    one_by_one = load_manifests(files)
    monkeypatch.setattr(reading, "PARALLEL_BYTES", 0)
    if reading._workers(files) < 2:
        pytest.skip("a single core or no fork here: the input is read one file at a time")
    in_workers = load_manifests(files)
    assert summary(in_workers) == summary(one_by_one)
    assert len(one_by_one.state.pods) == 4 * 5 - 1 - 2
    assert len(one_by_one.warnings) == 2
    assert one_by_one.errors == [f"{tmp_path / 'missing.yaml'}: no such file or directory"]


def test_small_inputs_and_stdin_are_read_without_workers(tmp_path: Path) -> None:
    files = many_files(tmp_path)
    assert reading._workers(files) == 0  # a few hundred bytes
    assert reading._workers([files[0], "-"]) == 0
    assert reading._workers(files[:1]) == 0
