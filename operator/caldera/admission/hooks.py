"""The webhooks Caldera serves, written once: path, kind, operations, rule and Volcano's name.

The operator registers a kopf handler per enabled entry and builds the webhook configurations
from the same entries; ``--enabled-admission`` picks entries by path as Volcano's webhook manager
does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from caldera.admission.hypernodes import validate_hypernode
from caldera.admission.podgroups import mutate_podgroup, validate_podgroup
from caldera.admission.pods import mutate_pod, validate_pod
from caldera.admission.queues import mutate_queue, validate_queue
from caldera.admission.review import Patch, Review
from caldera.errors import ConfigError
from caldera.framework.tolerance import did_you_mean

__all__ = ["HOOKS", "Hook", "enabled_hooks"]


@dataclass(frozen=True, slots=True)
class Hook:
    path: str
    """Where it is served (Volcano's path)."""
    name: str
    """The webhook's name in the configuration (Volcano's): what the API server's refusal says."""
    kind: str
    """Key of :data:`caldera.models.kinds.KINDS`."""
    operations: tuple[str, ...]
    mutating: bool
    rule: Callable[[Review], Patch | None]

    @property
    def id(self) -> str:
        """kopf's handler id, which is also the URL path kopf serves it at."""
        return self.path.strip("/")


HOOKS: tuple[Hook, ...] = (
    Hook("/queues/mutate", "mutatequeue.volcano.sh", "Queue", ("CREATE",), True, mutate_queue),
    Hook(
        "/queues/validate",
        "validatequeue.volcano.sh",
        "Queue",
        ("CREATE", "UPDATE", "DELETE"),
        False,
        validate_queue,
    ),
    Hook(
        "/podgroups/mutate",
        "mutatepodgroup.volcano.sh",
        "PodGroup",
        ("CREATE",),
        True,
        mutate_podgroup,
    ),
    Hook(
        "/podgroups/validate",
        "validatepodgroup.volcano.sh",
        "PodGroup",
        ("CREATE", "UPDATE"),
        False,
        validate_podgroup,
    ),
    Hook("/pods/mutate", "mutatepod.volcano.sh", "Pod", ("CREATE",), True, mutate_pod),
    Hook("/pods/validate", "validatepod.volcano.sh", "Pod", ("CREATE",), False, validate_pod),
    Hook(
        "/hypernodes/validate",
        "validatehypernodes.volcano.sh",
        "HyperNode",
        ("CREATE", "UPDATE"),
        False,
        validate_hypernode,
    ),
)
ALL = "all"


def enabled_hooks(text: str) -> list[Hook]:
    """The hooks ``--enabled-admission`` names (comma-separated paths, as Volcano's
    ``router.ForEachAdmission`` splits them, or ``all``); a path Caldera does not serve is a
    :class:`ConfigError` naming it (Volcano skips it silently)."""
    wanted = [part.strip() for part in text.split(",") if part.strip()]
    if ALL in wanted:
        return list(HOOKS)
    by_path = {hook.path: hook for hook in HOOKS}
    out: list[Hook] = []
    for path in wanted:
        hook = by_path.get(path)
        if hook is None:
            hint = did_you_mean(path, by_path)
            served = ", ".join(by_path)
            raise ConfigError(
                f"{path!r} is not an admission webhook Caldera serves{hint}; it serves {served}",
                key="--enabled-admission",
            )
        if hook not in out:
            out.append(hook)
    return out
