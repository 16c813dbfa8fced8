"""API client configuration shared by our own calls and kopf's watchers.

Credentials come from ``--kubeconfig`` (or ``KUBECONFIG`` / ``~/.kube/config``) out of cluster and
from the service account in cluster; kopf is logged in with the very same settings so both clients
authenticate alike.
"""

from __future__ import annotations

import os

import kopf
from kubernetes_asyncio import client, config

__all__ = ["connection_info", "load_configuration"]


async def load_configuration(kubeconfig: str | None) -> client.Configuration:
    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        await config.load_kube_config(config_file=path, client_configuration=cfg)
    else:
        config.load_incluster_config(client_configuration=cfg)
    return cfg


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
