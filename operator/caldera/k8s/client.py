"""API client configuration shared by our own calls and kopf's watchers.

Credentials come from ``--kubeconfig`` (or ``KUBECONFIG`` / ``~/.kube/config``) out of cluster and
from the service account in cluster; kopf is logged in with the very same settings so both clients
authenticate alike.

Proxy settings (``HTTPS_PROXY``/``NO_PROXY``) are read once, when the client is made.
kubernetes-asyncio's session would otherwise look up the proxy environment and ``~/.netrc`` in a
worker thread on every request; at thousands of requests a second those hand-offs between threads
were the largest cost the operator had, and they stall the event loop.
"""

from __future__ import annotations

import os
import urllib.request
from urllib.parse import urlsplit

import kopf
from kubernetes_asyncio import client, config

__all__ = ["KubeconfigError", "connection_info", "load_configuration", "make_api_client"]


class KubeconfigError(Exception):
    """The credentials cannot be loaded; the message says which file and why."""


async def load_configuration(
    kubeconfig: str | None, context: str | None = None
) -> client.Configuration:
    """The client settings of ``kubeconfig`` (its ``context``, else its current one), or of the
    pod's service account in a cluster."""
    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    where = path or "~/.kube/config"
    try:
        if path or not os.environ.get("KUBERNETES_SERVICE_HOST"):
            for one in (path or os.path.expanduser("~/.kube/config")).split(os.pathsep):
                if one and not os.path.exists(one):
                    raise KubeconfigError(
                        f"kubeconfig {one} does not exist (and this is not a pod in a cluster)"
                    )
            await config.load_kube_config(
                config_file=path, context=context, client_configuration=cfg
            )
        else:
            where = "in-cluster service account"
            config.load_incluster_config(client_configuration=cfg)
    except KubeconfigError:
        raise
    except OSError as exc:
        raise KubeconfigError(
            f"cannot read kubeconfig {exc.filename or where}: {exc.strerror}"
        ) from None
    except Exception as exc:  # noqa: BLE001 - the loader raises many kinds (YAML, config, keys):
        # all mean the same thing to the user, and no traceback may reach them
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise KubeconfigError(f"invalid kubeconfig {where}: {text}") from None
    if not cfg.host:
        raise KubeconfigError(f"kubeconfig {where} names no server")
    return cfg


def make_api_client(cfg: client.Configuration) -> client.ApiClient:
    """An API client that resolves the proxy once instead of on every request."""
    if not cfg.proxy:
        cfg.proxy = env_proxy(cfg.host or "")
    api = client.ApiClient(configuration=cfg)
    api.rest_client.proxy = cfg.proxy
    # The session is made inside kubernetes-asyncio with trust_env on; aiohttp lists
    # ``_trust_env`` among its settable attributes, and the environment was read above.
    api.rest_client.pool_manager._trust_env = False
    return api


def env_proxy(server: str) -> str | None:
    """The proxy the environment names for ``server`` (``NO_PROXY`` honoured), if any."""
    parts = urlsplit(server)
    host = parts.hostname or ""
    if not host or urllib.request.proxy_bypass(host):
        return None
    return urllib.request.getproxies().get(parts.scheme or "https")


def connection_info(cfg: client.Configuration) -> kopf.ConnectionInfo:
    token = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
    scheme = None
    if token and " " in token:
        scheme, token = token.split(" ", 1)
    return kopf.ConnectionInfo(
        server=cfg.host or "",
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        username=cfg.username or None,
        password=cfg.password or None,
        scheme=scheme,
        token=token,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
    )
