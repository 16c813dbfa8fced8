"""Create or update the Validating- and MutatingWebhookConfiguration the webhooks are listed in.

Each replica applies the same content (the certificate is shared), so the last writer changes
nothing. A merge patch of ``webhooks`` replaces the list whole: a webhook switched off with
``--enabled-admission`` is dropped from the configuration on the next start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from caldera.k8s.resources import MUTATING, VALIDATING
from caldera.k8s.rest import MERGE_PATCH, ApiError, Resource, Rest

__all__ = ["apply_configuration"]
_KINDS = {
    VALIDATING.plural: "ValidatingWebhookConfiguration",
    MUTATING.plural: "MutatingWebhookConfiguration",
}


async def apply_configuration(
    rest: Rest,
    resource: Resource,
    name: str,
    webhooks: Sequence[Mapping[str, Any]],
    labels: Mapping[str, str],
) -> None:
    """Make configuration ``name`` hold exactly ``webhooks`` (created when absent)."""
    patch = {"metadata": {"labels": dict(labels)}, "webhooks": list(webhooks)}
    try:
        await rest.call("patch", resource, name=name, body=patch, content_type=MERGE_PATCH)
        return
    except ApiError as exc:
        if exc.status != 404:
            raise
    body = {
        "apiVersion": f"{resource.group}/{resource.version}",
        "kind": _KINDS[resource.plural],
        "metadata": {"name": name, "labels": dict(labels)},
        "webhooks": list(webhooks),
    }
    try:
        await rest.call("create", resource, body=body)
    except ApiError as exc:
        if exc.status != 409:  # another replica created it first: patch theirs
            raise
        await rest.call("patch", resource, name=name, body=patch, content_type=MERGE_PATCH)
