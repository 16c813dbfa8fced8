"""The ``k8s`` fixture: a Kubernetes API for integration tests.

By default it is the in-process emulator (``tests/emulator``) on 127.0.0.1 with a random free
port, fresh for every test. With ``CALDERA_E2E_KUBECONFIG=/path/to/kubeconfig`` the same tests run
against that real cluster instead, each in a namespace of its own (``k8s.namespace``); tests that
need the emulator (fault injection, its request log, objects a real API server refuses, a kubelet)
skip there and say why.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from emulator import Emulator
from emulator.handles import ClusterHandle, EmulatorHandle, K8sHandle

E2E_KUBECONFIG_ENV = "CALDERA_E2E_KUBECONFIG"


@pytest.fixture
async def k8s(tmp_path: Path) -> AsyncIterator[K8sHandle]:
    """A handle with ``.url``, ``.kubeconfig_path``, ``api_client()``, object helpers, faults."""
    handle: K8sHandle
    kubeconfig = os.environ.get(E2E_KUBECONFIG_ENV)
    emulator: Emulator | None = None
    if kubeconfig:
        handle = ClusterHandle(Path(kubeconfig))
    else:
        emulator = Emulator()
        await emulator.start()
        handle = EmulatorHandle(emulator, tmp_path / "kubeconfig")
    try:
        await handle.setup()
        yield handle
    finally:
        try:
            await handle.aclose()
        finally:
            if emulator is not None:
                await emulator.stop()
    if emulator is not None and emulator.internal_errors:
        pytest.fail(f"the emulator failed internally: {emulator.internal_errors!r}")
