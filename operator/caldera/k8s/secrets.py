"""Get-or-create of a TLS Secret, so replicas that start together end up with the same one."""

from __future__ import annotations

import base64
from collections.abc import Callable

from caldera.k8s.resources import CREATED_LABELS, SECRETS
from caldera.k8s.rest import ApiError, Rest

__all__ = ["shared_tls"]


def _pem(secret: dict[str, object], key: str) -> bytes:
    data = secret.get("data")
    if not isinstance(data, dict) or not isinstance(data.get(key), str):
        raise TypeError(f"has no data[{key!r}]")
    return base64.b64decode(data[key])


async def shared_tls(
    rest: Rest, namespace: str, name: str, make: Callable[[], tuple[bytes, bytes]]
) -> tuple[bytes, bytes]:
    """The (certificate, key) PEMs in Secret ``namespace/name``; made and stored if it is absent.

    Two replicas starting together both try to create it; the one that loses (409) reads the
    winner's. Raises :class:`TypeError` for a Secret without ``tls.crt`` and ``tls.key``.
    """
    for _ in range(2):
        try:
            secret = await rest.call("get", SECRETS, namespace=namespace, name=name)
            return _pem(secret, "tls.crt"), _pem(secret, "tls.key")
        except ApiError as exc:
            if exc.status != 404:
                raise
        cert, key = make()
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": CREATED_LABELS,
            },
            "data": {
                "tls.crt": base64.b64encode(cert).decode(),
                "tls.key": base64.b64encode(key).decode(),
            },
        }
        try:
            await rest.call("create", SECRETS, namespace=namespace, body=body)
            return cert, key
        except ApiError as exc:
            if exc.status != 409:
                raise
    raise ApiError(409, f"secret {namespace}/{name} was created and deleted while being read")
