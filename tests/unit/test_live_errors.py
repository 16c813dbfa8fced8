"""`caldera explain`/`simulate --kubeconfig` when the cluster cannot be read: one line, exit 2."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from caldera.cli import main
from emulator.handles import write_kubeconfig


def a_closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    assert out.out == ""
    return code, out.err


def test_a_kubeconfig_that_does_not_exist_is_said_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"
    code, err = run(capsys, "simulate", "--kubeconfig", str(missing))
    assert code == 2
    assert err == (
        f"caldera: kubeconfig {missing} does not exist (and this is not a pod in a cluster)\n"
    )


def test_a_kubeconfig_that_is_not_one_is_said_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [")
    code, err = run(capsys, "explain", "p", "--kubeconfig", str(bad))
    assert code == 2
    assert err.startswith(f"caldera: invalid kubeconfig {bad}: ")
    assert err.count("\n") == 1


def test_a_context_the_kubeconfig_does_not_have_is_said_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{a_closed_port()}")
    code, err = run(capsys, "simulate", "--kubeconfig", str(path), "--context", "prod")
    assert code == 2
    assert err.startswith(f"caldera: invalid kubeconfig {path}: ")
    assert "prod" in err
    assert err.count("\n") == 1


def test_a_server_that_does_not_answer_is_said_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = f"http://127.0.0.1:{a_closed_port()}"
    path = write_kubeconfig(tmp_path / "kubeconfig", server)
    code, err = run(capsys, "explain", "default/p", "--kubeconfig", str(path))
    assert code == 2
    assert err.startswith(f"caldera: cannot reach the API server at {server}: ")
    assert err.count("\n") == 1


def test_without_manifests_or_a_cluster_there_is_nothing_to_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simulate"])
    assert exit_.value.code == 2
    assert "give MANIFEST files, or --kubeconfig to read a cluster" in capsys.readouterr().err
