"""What every command says and returns when it cannot do its job: exit codes, one-line errors,
``--strict``, ``--version``, Ctrl-C and the last-resort guard."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

import caldera.cli
from caldera.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "operator")}

NODE = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""
POD = """
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  schedulerName: volcano
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""


def write(tmp_path: Path, *docs: str, name: str = "cluster.yaml") -> str:
    path = tmp_path / name
    path.write_text("---".join(docs))
    return str(path)


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The command's only stderr line (and nothing on stdout)."""
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


# -- inputs that give nothing to schedule --------------------------------------------------------


@pytest.mark.parametrize("command", [["simulate"], ["explain", "default/p"]])
def test_a_manifest_path_that_does_not_exist_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    missing = tmp_path / "typo.yaml"
    assert main([*command, write(tmp_path, NODE, POD), str(missing)]) == 2
    assert error_line(capsys) == f"caldera: {missing}: no such file or directory"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"\x89PNG\r\n\x1a\n\x00\x00", "not a text file (not UTF-8)", id="an image"),
        pytest.param(b"kind: Node\x00\x07", "not a text file (character #x0000", id="NUL bytes"),
    ],
)
def test_binary_junk_is_an_error_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    junk = tmp_path / "junk.yaml"
    junk.write_bytes(content)
    assert main(["simulate", str(junk)]) == 2
    assert error_line(capsys).startswith(f"caldera: {junk}: {message}")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="an empty file"),
        pytest.param("# nothing here\n---\n", id="only comments"),
    ],
)
def test_manifests_with_nothing_to_schedule_are_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    path = write(tmp_path, text)
    assert main(["simulate", path]) == 2
    assert error_line(capsys) == f"caldera: no nodes in {path}: nothing to schedule on"
    assert main(["explain", "p", path]) == 2
    assert error_line(capsys) == f"caldera: no nodes in {path}: nothing to schedule on"


def test_pods_without_a_node_are_decided_as_far_as_they_can_be(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, POD)
    no_nodes = (
        f"caldera: no nodes in {path}: no pod can be placed; admission, phases and reasons only"
    )
    assert main(["simulate", path]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [no_nodes]
    assert "default/p  Unschedulable  0/0 nodes are available" in out
    assert main(["simulate", "--strict", path]) == 1
    capsys.readouterr()
    assert main(["explain", "p", path]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [no_nodes]
    assert "verdict: Unschedulable: 0/0 nodes are available" in out


def test_a_node_skipped_as_malformed_is_reported_before_the_no_nodes_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, NODE.replace('cpu: "4"', "cpu: four"), POD)
    assert main(["simulate", path]) == 0
    first, second = capsys.readouterr().err.splitlines()
    assert first.startswith(f"caldera: {path}: Node n1: status.allocatable: cpu: invalid quantity")
    assert second.startswith(f"caldera: no nodes in {path}: no pod can be placed")


def test_a_directory_without_manifests_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", str(tmp_path)]) == 2
    assert error_line(capsys) == f"caldera: {tmp_path}: no *.yaml or *.yml file in this directory"


def test_nodes_without_pending_pods_are_simulated_and_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs = POD.replace("schedulerName: volcano", "schedulerName: default-scheduler")
    assert main(["simulate", write(tmp_path, NODE, theirs)]) == 0
    out, err = capsys.readouterr()
    assert err == "caldera: nothing to schedule: no pending pod has schedulerName volcano\n"
    assert "bound nothing" in out


# -- --strict ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(POD.replace("name: p,", "name: bad,").replace('"1"', "lots"), id="malformed"),
        pytest.param(
            POD.replace("name: p,", "name: lost, annotations: {scheduling.k8s.io/group-name: x},"),
            id="a pod naming a missing PodGroup",
        ),
        pytest.param("\njust text\n", id="a document that is not an object"),
    ],
)
def test_strict_turns_any_reported_object_problem_into_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str
) -> None:
    path = write(tmp_path, NODE, POD, extra)
    assert main(["simulate", path]) == 0
    problem = capsys.readouterr().err
    assert problem
    assert main(["simulate", "--strict", path]) == 1
    out, err = capsys.readouterr()
    assert err == problem
    assert "bound 1 pod(s)" in out  # the rest still ran


def test_strict_applies_to_explain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, NODE, POD, POD.replace("name: p,", "name: q,").replace('"1"', "x"))
    assert main(["explain", "p", path]) == 0
    assert main(["explain", "--strict", "p", path]) == 1
    assert "verdict: bound to n1" in capsys.readouterr().out


def test_strict_passes_clean_input_and_kinds_the_scheduler_ignores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configmap = "\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n"
    assert main(["simulate", "--strict", write(tmp_path, NODE, POD, configmap)]) == 0
    assert "ignored ConfigMap settings" in capsys.readouterr().err


# -- usage, version --------------------------------------------------------------------------------


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"caldera {importlib.metadata.version('caldera')}\n"


@pytest.mark.parametrize(
    ("argv", "mentions"),
    [
        pytest.param(["simulate"], "MANIFEST", id="no manifest"),
        pytest.param(["simulate", "--cycles", "many", "x.yaml"], "--cycles", id="bad number"),
        pytest.param(["explain", "--output", "xml", "p", "x.yaml"], "--output", id="bad choice"),
        pytest.param(["run", "--leader-elect", "perhaps"], "--leader-elect", id="bad flag"),
        pytest.param(["frobnicate"], "frobnicate", id="unknown command"),
    ],
)
def test_a_usage_error_is_one_line_pointing_at_help(
    capsys: pytest.CaptureFixture[str], argv: list[str], mentions: str
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    line = error_line(capsys)
    assert line.startswith("caldera: ") and mentions in line
    assert line.endswith("--help)")


# -- caldera run: fail fast ----------------------------------------------------------------------


def test_run_rejects_a_bad_policy_before_it_connects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text('actions: "enqueue, allocate, teleport"\n')
    # the kubeconfig names a server that would have to be waited for: the policy is checked first
    argv = ["run", "--scheduler-conf", str(conf), "--kubeconfig", str(tmp_path / "none")]
    assert main(argv) == 2
    line = error_line(capsys)
    assert line.startswith(f"caldera: invalid policy: {conf}: actions: ")
    assert "teleport" in line
    assert main(["run", "--scheduler-conf", str(tmp_path / "missing.conf")]) == 2
    assert error_line(capsys) == (
        f"caldera: invalid policy: {tmp_path / 'missing.conf'}: "
        "cannot read policy file: No such file or directory"
    )


def test_run_with_strict_policy_refuses_a_plugin_it_does_not_have_before_it_connects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: topology910\n')
    argv = ["run", "--scheduler-conf", str(conf), "--kubeconfig", str(tmp_path / "none")]
    assert main([*argv, "--strict-policy"]) == 2
    assert error_line(capsys).startswith(
        f"caldera: invalid policy: {conf}: tiers[0].plugins[0].name: unknown plugin 'topology910'"
    )


def test_run_with_a_kubeconfig_that_does_not_exist_exits_2_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "kubeconfig"
    done = subprocess.run(
        [sys.executable, "-m", "caldera", "run", "--kubeconfig", str(missing)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"caldera: kubeconfig {missing} does not exist (and this is not a pod in a cluster)"
    ]


# -- Ctrl-C and the last resort ------------------------------------------------------------------


def interrupt(*args: object, **kwargs: object) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("target", "argv"),
    [
        pytest.param("caldera.cli.simulate", ["simulate", str(EXAMPLES)], id="simulate"),
        pytest.param(
            "caldera.cli.explain", ["explain", "research/resnet50-0", str(EXAMPLES)], id="explain"
        ),
        pytest.param("caldera.operator.app.run", ["run"], id="run"),
    ],
)
def test_ctrl_c_ends_any_command_with_130_and_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    target: str,
    argv: list[str],
) -> None:
    monkeypatch.setattr(target, interrupt)
    assert main(argv) == 130
    assert error_line(capsys) == "caldera: interrupted"


def test_a_real_sigint_during_a_simulation_exits_130_without_a_traceback() -> None:
    # The first scheduling cycle sends the process SIGINT, as Ctrl-C in a terminal would.
    script = (
        "import os, signal, sys\n"
        "import caldera.simulate.runner as runner\n"
        "from caldera.cli import main\n"
        "def cycle(*args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    signal.pause()\n"
        "runner.run_cycle = cycle\n"
        f"sys.exit(main(['simulate', {str(EXAMPLES)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr, done.stdout) == (130, "caldera: interrupted\n", "")


def test_an_unexpected_exception_is_one_internal_error_line_with_exit_70(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("it broke\n  here")

    monkeypatch.setattr(caldera.cli, "simulate", broken)
    assert main(["simulate", str(EXAMPLES)]) == 70
    assert (
        error_line(capsys) == "caldera: internal error: RuntimeError: it broke here (please report)"
    )
