"""Every command and manifest the documentation shows works as written.

The README and the documentation site (``docs/``, built by MkDocs) show commands in ``sh`` blocks
(and ``console`` blocks, whose ``$`` lines are commands), and manifests and policies in ``yaml``
blocks. This test reads every such block and:

- loads each YAML document: a policy (``actions``/``tiers``) through the strict policy loader, an
  object through the same loader ``caldera simulate`` uses, which must take it without a warning
  (kinds the scheduler does not read, such as a Job, must still be whole objects);
- runs each ``caldera`` command that needs no cluster, in this process, and expects exit 0;
- checks each command that needs a cluster or a container tool (``kubectl``, ``kind``, ``docker``,
  ``minikube``, ``skaffold``, a ``caldera`` command with ``--kubeconfig``): the manifests it
  applies load as above, the files it names exist, and a ``caldera`` command's flags parse;
- checks that each ``make`` target exists, that each benchmark (``python benchmarks/...``, run on
  demand, not here) is given only flags its ``--help`` lists, and that the tests a ``pytest``
  command names exist.

A command no rule knows fails the test, so a new kind of command needs a rule here. Blocks in
other languages (``text``, none: synopses and output) are not commands.
"""

from __future__ import annotations

import functools
import itertools
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from builders import REGISTRY
from caldera.cli import main
from caldera.framework.policy import load_policy
from caldera.simulate.manifests import load_manifests

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
NEEDS_A_CLUSTER = {"kubectl", "kind", "docker", "minikube", "skaffold"}
"""Tools this test cannot run here: their lines are checked, not run."""


def blocks(language: str) -> Iterator[tuple[str, str]]:
    """(where, text) of every fenced block of ``language`` in the pages."""
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            if match.group(1) == language:
                line = text.count("\n", 0, match.start()) + 1
                yield f"{page.relative_to(ROOT)}:{line}", match.group(2)


def commands(text: str, *, console: bool = False) -> Iterator[tuple[list[str], list[str]]]:
    """(words, the output shown after them) of each command of a shell block: continued lines
    joined, comments dropped; in a console block, the lines after ``$`` are the commands and the
    lines up to the next one their output."""
    joined = text.replace("\\\n", " ")
    found: list[tuple[list[str], list[str]]] = []
    for raw in joined.splitlines():
        line = raw.strip()
        if console and not line.startswith("$ "):
            if found:
                found[-1][1].append(raw.rstrip())
            continue
        words = shlex.split(line.removeprefix("$ "), comments=True)
        if words:
            found.append((words, []))
    yield from found


def manifest_problems(path: Path) -> list[str]:
    loaded = load_manifests([str(path)])
    return [*loaded.errors, *loaded.warnings]


def in_this_test(policy: str, tmp_path: Path) -> str:
    """``policy`` with the files it names inside the scheduler's pod (HAMi's device
    configuration, mounted from a ConfigMap) made here."""
    config = tmp_path / "device-config.yaml"
    config.write_text("nvidia:\n  resourceCountName: hami.io/gpu\n")
    return re.sub(r"(DeviceConfigFile: )/\S+", rf"\g<1>{config}", policy)


def yaml_cases() -> list[object]:
    return [pytest.param(text, id=where) for where, text in blocks("yaml")]


def command_cases() -> list[object]:
    out: list[object] = []
    for language, console in (("sh", False), ("console", True)):
        for where, text in blocks(language):
            for n, (words, shown) in enumerate(commands(text, console=console)):
                out.append(pytest.param(words, shown, id=f"{where}#{n + 1} {words[0]}"))
    return out


@pytest.mark.parametrize("text", yaml_cases())
def test_every_yaml_block_loads_as_a_policy_or_as_objects(text: str, tmp_path: Path) -> None:
    documents = [d for d in yaml.safe_load_all(text) if d is not None]
    assert documents, "an empty block"
    for doc in documents:
        assert isinstance(doc, dict), f"not a mapping: {doc!r}"
        if "actions" in doc or "tiers" in doc:
            load_policy(in_this_test(yaml.safe_dump(doc), tmp_path), REGISTRY, strict=True)
            continue
        assert "apiVersion" in doc and "kind" in doc, "neither a policy nor a whole object"
        path = tmp_path / "object.yaml"
        path.write_text(yaml.safe_dump(doc))
        assert manifest_problems(path) == []
        assert doc.get("metadata", {}).get("name"), "an object without a name"


def _paths(words: list[str]) -> list[str]:
    """The files a command names: ``-f`` arguments and the build context of ``docker build``."""
    out = [b for a, b in itertools.pairwise(words) if a in ("-f", "--filename")]
    if words[:2] == ["docker", "build"]:
        out.append(words[-1])
    return out


@functools.cache
def help_of(script: str) -> str:
    done = subprocess.run(
        [sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.mark.parametrize(("words", "shown"), command_cases())
def test_every_documented_command_runs_or_names_what_exists(
    words: list[str],
    shown: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A ``caldera`` command that needs no cluster runs, and prints each line shown after it
    (lines the page shortened with ``…`` aside)."""
    monkeypatch.chdir(ROOT)
    while "=" in words[0]:  # VAR=value before the command
        words = words[1:]
    tool = Path(words[0]).name
    if tool == "python" and words[1].startswith("benchmarks/"):
        listed = help_of(words[1])
        for flag in (w.partition("=")[0] for w in words[2:] if w.startswith("--")):
            assert flag in listed, f"{words[1]} has no {flag}"
        return
    if tool == "pytest":
        for name in (w for w in words[1:] if not w.startswith("-")):
            assert (ROOT / name.partition("::")[0]).exists(), name
        return
    if tool == "mkdocs":  # `make docs` builds the site, strictly, in every CI run
        assert words[1] in ("build", "serve") and (ROOT / "mkdocs.yml").exists()
        return
    if tool == "make":
        targets = re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE)
        assert set(words[1:]) <= set(targets)
        return
    if tool == "caldera" and "--kubeconfig" not in words:
        assert main(words[1:]) == 0
        printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
        assert [line for line in shown if "…" not in line and line not in printed] == []
        return
    if tool == "caldera":  # a live cluster: the flags must parse
        live = [w for w in words[1:] if "$(" not in w]
        with pytest.raises(SystemExit) as stop:
            main([*live, "--help"])
        assert stop.value.code == 0
        return
    assert tool in NEEDS_A_CLUSTER, f"no rule checks {tool!r}: add one to this test"
    for name in _paths(words):
        path = ROOT / name
        assert path.exists(), f"{name} does not exist"
        if words[:2] == ["kubectl", "apply"]:
            assert manifest_problems(path) == [], name


@pytest.mark.parametrize("text", [pytest.param(t, id=w) for w, t in blocks("python")])
def test_every_python_block_runs(text: str) -> None:
    """A plugin written as the development page shows loads (its imports exist, its arguments
    are a valid model)."""
    exec(compile(text, "<docs>", "exec"), {"__name__": "docs_example"})  # noqa: S102 (our own page)


def test_every_file_the_readme_links_to_exists() -> None:
    """The README is outside the site (``mkdocs build --strict`` checks the site's own links)."""
    targets = re.findall(r"\]\(([^)#\s]+)[^)]*\)", (ROOT / "README.md").read_text())
    local = [t for t in targets if "://" not in t]
    assert local, "the README links to its documentation"
    assert [t for t in local if not (ROOT / t).exists()] == []
