"""HTTP endpoints: ``/healthz`` and ``/readyz`` on the health address, ``/metrics`` on the other.

Liveness answers as long as the event loop runs; readiness turns true once the cache has its
initial listing (the first session could run). Addresses are Go style (``:8080`` = all interfaces).
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["parse_address", "serve_health", "serve_metrics"]


def parse_address(address: str) -> tuple[str | None, int]:
    host, _, port = address.rpartition(":")
    return (host or None), int(port)


async def _serve(app: web.Application, address: str) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = parse_address(address)
    await web.TCPSite(runner, host, port).start()
    return runner


async def serve_health(address: str, ready: asyncio.Event) -> web.AppRunner:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if ready.is_set():
            return web.Response(text="ok")
        return web.Response(status=503, text="not ready yet: listing the cluster")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return await _serve(app, address)


async def serve_metrics(address: str, registry: CollectorRegistry) -> web.AppRunner:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return await _serve(app, address)
