"""Where Volcano's kinds live in the API, and the patch type custom resources accept."""

from __future__ import annotations

__all__ = ["MERGE_PATCH", "SCHEDULING_GROUP", "SCHEDULING_VERSION"]

SCHEDULING_GROUP = "scheduling.volcano.sh"
SCHEDULING_VERSION = "v1beta1"
MERGE_PATCH = "application/merge-patch+json"
"""kubernetes-asyncio would send a dict body to a custom object as a JSON patch; say otherwise."""
