"""The API client reads the proxy environment once, not on every request."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from caldera.k8s.client import env_proxy, make_api_client
from caldera.k8s.rest import status_message


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


def test_the_environment_proxy_is_used_for_the_api_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    assert env_proxy("https://10.0.0.1:6443") == "http://proxy.corp:3128"


def test_no_proxy_exempts_the_api_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", "10.0.0.1,.cluster.local")
    assert env_proxy("https://10.0.0.1:6443") is None
    assert env_proxy("https://kubernetes.default.svc.cluster.local") is None


def test_without_a_proxy_environment_there_is_no_proxy() -> None:
    assert env_proxy("https://10.0.0.1:6443") is None


@pytest.mark.parametrize(
    ("explicit", "proxy"),
    [
        pytest.param(
            None,
            "http://proxy.corp:3128",
            id="the client takes the environment's proxy once, not per request",
        ),
        pytest.param("http://other:8080", "http://other:8080", id="an explicit proxy wins"),
    ],
)
async def test_the_client_reads_the_proxy_environment_once_and_an_explicit_proxy_wins(
    monkeypatch: pytest.MonkeyPatch, explicit: str | None, proxy: str
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    cfg = client.Configuration(host="https://10.0.0.1:6443")
    if explicit is not None:
        cfg.proxy = explicit
    api = make_api_client(cfg)
    try:
        assert api.rest_client.proxy == proxy
        assert api.rest_client.pool_manager.trust_env is False
    finally:
        await api.close()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            b'{"kind":"Status","message":"pods \\"a\\" not found","reason":"NotFound"}',
            'pods "a" not found',
        ),
        ('{"kind":"Status","reason":"Conflict"}', "Conflict"),
        ("upstream connect error", "upstream connect error"),
        ("[1, 2]", "[1, 2]"),
        (None, ""),
    ],
)
def test_the_status_message_is_read_from_an_error_reply(
    raw: str | bytes | None, expected: str
) -> None:
    assert status_message(raw) == expected
