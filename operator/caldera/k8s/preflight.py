"""Before the operator starts: can it read its credentials, and does the API server answer?

Neither is something a running operator can fix by retrying forever, so each is said in one line
and the command exits (code 2): a kubeconfig that is missing or invalid at once, an API server
that does not answer within ``--api-wait``. A server that answers with an error (401, 403) is a
problem of credentials or RBAC and is said as the server says it.
"""

from __future__ import annotations

import asyncio
import time

from caldera.k8s.client import KubeconfigError, load_configuration
from caldera.k8s.errors import API_ERRORS, describe
from caldera.k8s.rest import ApiError, Rest

__all__ = ["preflight"]


async def preflight(kubeconfig: str | None, wait: float) -> str | None:
    """None when the API server answers; otherwise what is wrong, in one line."""
    try:
        cfg = await load_configuration(kubeconfig)
    except KubeconfigError as exc:
        return str(exc)
    rest = Rest(cfg, timeout=min(wait, 5.0))
    deadline = time.monotonic() + wait
    try:
        while True:
            try:
                await rest.get_path("/version")
                return None
            except ApiError as exc:
                return f"the API server at {cfg.host} refused us: {exc}"
            except API_ERRORS as exc:
                if time.monotonic() >= deadline:
                    return (
                        f"cannot reach the API server at {cfg.host} "
                        f"(waited {wait:g}s): {describe(exc)}"
                    )
            await asyncio.sleep(0.5)
    finally:
        await rest.close()
