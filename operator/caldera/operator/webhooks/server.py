"""The admission webhook server kopf runs: TLS from a shared Secret, reached through a Service.

kopf's own :class:`kopf.WebhookServer` serves the requests and reports a client config that the
webhook configurations get; this wraps it in the two things a production install needs:

* a certificate every replica shares (:mod:`.tls`, stored through :mod:`caldera.k8s.secrets`) or
  the files the operator was given (cert-manager), and
* a client config that names the Service (``service: {namespace, name, port}``) rather than a
  URL, as the API server reaches webhooks inside the cluster.

A server that cannot start (port taken, Secret unreadable) is logged and tried again; it never
takes the operator down with it: the scheduler does not depend on its own webhooks.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kopf

from caldera.k8s.rest import Rest
from caldera.k8s.secrets import shared_tls
from caldera.operator.settings import Settings
from caldera.operator.webhooks.tls import Certificate, self_signed, service_names

__all__ = ["Server", "TlsSource", "file_tls", "made_tls", "names_for", "server_for"]

log = logging.getLogger(__name__)

TlsFiles = tuple[Path, Path, bytes]
"""The server's certificate file, its key file, and the CA bundle the API server checks it with."""
TlsSource = Callable[[], Awaitable[TlsFiles]]

RETRY = (1.0, 2.0, 5.0, 10.0, 30.0)
"""Seconds between attempts to start a server that failed, the last repeated."""


def file_tls(settings: Settings) -> TlsSource:
    """TLS from the files given on the command line (kopf reloads them when they change, so a
    certificate renewed by cert-manager is picked up)."""

    async def read() -> TlsFiles:
        cert, key = Path(settings.tls_cert_file), Path(settings.tls_private_key_file)
        ca = Path(settings.ca_cert_file or settings.tls_cert_file).read_bytes()
        return cert, key, ca

    return read


Fetch = Callable[[Callable[[], Certificate]], Awaitable[Certificate]]
"""Gets the shared certificate, storing the one the callable makes when there is none yet."""


def made_tls(names: list[str], fetch: Fetch) -> TlsSource:
    """A self-signed certificate for ``names``, got or stored by ``fetch`` (the Secret), written
    to a private directory for the server to load (:mod:`ssl` reads only files)."""
    folder = Path(tempfile.mkdtemp(prefix="caldera-webhook-tls-"))  # mode 0700

    async def read() -> TlsFiles:
        cert = await fetch(lambda: self_signed(names))
        crt, key = folder / "tls.crt", folder / "tls.key"
        crt.write_bytes(cert.cert)
        key.touch(mode=0o600)
        key.write_bytes(cert.key)
        return crt, key, cert.cert

    return read


class Server:
    """What kopf's ``settings.admission.server`` calls: yields a client config per (re)start."""

    def __init__(
        self,
        settings: Settings,
        tls: TlsSource,
        on_config: Callable[[Mapping[str, Any]], None],
    ) -> None:
        self._settings = settings
        self._tls = tls
        self._on_config = on_config
        self.port = settings.webhook_port
        self.serving = asyncio.Event()
        """Set while the server listens (tests and readiness wait for it)."""

    def client_config(self, ca: bytes) -> dict[str, Any]:
        """How the API server reaches the webhooks: the Service, or ``--webhook-url``."""
        s = self._settings
        config: dict[str, Any] = {"caBundle": base64.b64encode(ca).decode()}
        if s.webhook_url:
            config["url"] = s.webhook_url.rstrip("/")
        else:
            config["service"] = {
                "namespace": s.webhook_namespace,
                "name": s.webhook_service_name,
                "port": 443,
                "path": "",
            }
        return config

    async def __call__(self, fn: Any) -> AsyncIterator[Any]:
        attempt = 0
        while True:
            try:
                cert, key, ca = await self._tls()
                server = kopf.WebhookServer(
                    addr="0.0.0.0", port=self.port, certfile=cert, pkeyfile=key, cadata=ca
                )
                async for _ in server(fn):
                    attempt = 0
                    self.serving.set()
                    log.info("serving admission webhooks on port %d", self.port)
                    config = self.client_config(ca)
                    self._on_config(config)
                    yield config
            except asyncio.CancelledError:
                self.serving.clear()
                raise
            except Exception as exc:  # noqa: BLE001 -- any failure: say it, retry, keep scheduling
                self.serving.clear()
                delay = RETRY[min(attempt, len(RETRY) - 1)]
                attempt += 1
                log.error(
                    "admission webhooks are not served (%s); trying again in %.0fs", exc, delay
                )
                await asyncio.sleep(delay)


def names_for(settings: Settings) -> list[str]:
    """The names the certificate must carry: the Service's, or the host of --webhook-url."""
    if settings.webhook_url:
        host = urlsplit(settings.webhook_url).hostname or "localhost"
        return [host, "localhost", "127.0.0.1"]
    return service_names(settings.webhook_service_name, settings.webhook_namespace)


def server_for(
    settings: Settings,
    rest: Callable[[], Rest | None],
    on_config: Callable[[Mapping[str, Any]], None],
) -> Server:
    """The server for these settings: the given certificate files, else the shared Secret."""
    if settings.tls_cert_file:
        return Server(settings, file_tls(settings), on_config)

    async def fetch(make: Callable[[], Certificate]) -> Certificate:
        client = rest()
        if client is None:
            raise RuntimeError("the API client is not ready")

        def pems() -> tuple[bytes, bytes]:
            made = make()
            return made.cert, made.key

        secret = f"{settings.webhook_service_name}-tls"
        cert, key = await shared_tls(client, settings.webhook_namespace, secret, pems)
        return Certificate(cert, key)

    return Server(settings, made_tls(names_for(settings), fetch), on_config)
