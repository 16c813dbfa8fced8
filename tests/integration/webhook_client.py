"""Sending AdmissionReviews to the webhook server the way the API server does: over HTTPS, to the
URL and with the CA bundle the webhook configuration names."""

from __future__ import annotations

import base64
import json
import ssl
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from caldera.models.kinds import KINDS
from emulator.handles import K8sHandle

CONFIGURATION = "caldera-scheduler"


@dataclass(frozen=True)
class Answer:
    allowed: bool
    message: str
    patch: list[dict[str, Any]]


class WebhookClient:
    """The API server's side of the webhooks, read from the configurations in the cluster."""

    def __init__(self, urls: Mapping[str, str], ca: bytes) -> None:
        self.urls = dict(urls)
        self._context = ssl.create_default_context(cadata=ca.decode())
        self._session = aiohttp.ClientSession()

    @classmethod
    async def from_cluster(cls, k8s: K8sHandle) -> WebhookClient:
        return cls(*await cls.configured(k8s))

    @staticmethod
    async def configured(k8s: K8sHandle) -> tuple[dict[str, str], bytes]:
        """Each webhook's URL by path, and the CA bundle, from the configurations."""
        urls: dict[str, str] = {}
        ca = b""
        for plural in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
            config = await k8s.get(plural, CONFIGURATION)
            for hook in config["webhooks"]:
                client = hook["clientConfig"]
                path = "/" + client["url"].split("/", 3)[3]
                urls[path] = client["url"]
                ca = base64.b64decode(client["caBundle"])
        return urls, ca

    async def close(self) -> None:
        await self._session.close()

    async def send(
        self,
        path: str,
        operation: str,
        obj: Mapping[str, Any] | None,
        *,
        old: Mapping[str, Any] | None = None,
        kind: str = "",
        dry_run: bool = False,
    ) -> Answer:
        """One request; ``kind`` defaults to the one the path is about."""
        kind_entry = KINDS[kind or _kind_of(path)]
        body = obj if obj is not None else old or {}
        meta = body.get("metadata") or {}
        uid = str(uuid.uuid4())
        review: dict[str, Any] = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {
                    "group": kind_entry.group,
                    "version": kind_entry.version,
                    "kind": kind_entry.name,
                },
                "resource": {
                    "group": kind_entry.group,
                    "version": kind_entry.version,
                    "resource": kind_entry.plural,
                },
                "name": meta.get("name", ""),
                "namespace": meta.get("namespace", ""),
                "operation": operation,
                "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
                "object": obj,
                "oldObject": old,
                "dryRun": dry_run,
            },
        }
        async with self._session.post(self.urls[path], json=review, ssl=self._context) as reply:
            assert reply.status == 200, await reply.text()
            answer = (await reply.json())["response"]
        assert answer["uid"] == uid
        patch = answer.get("patch")
        return Answer(
            allowed=answer["allowed"],
            message=(answer.get("status") or {}).get("message", ""),
            patch=json.loads(base64.b64decode(patch)) if patch else [],
        )


def _kind_of(path: str) -> str:
    return {
        "queues": "Queue",
        "podgroups": "PodGroup",
        "pods": "Pod",
        "hypernodes": "HyperNode",
    }[path.strip("/").split("/")[0]]
