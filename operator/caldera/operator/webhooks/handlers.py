"""kopf admission handlers for the enabled webhooks, and the configurations that route to them.

Each enabled :class:`~caldera.admission.hooks.Hook` becomes a ``kopf.on.validate`` or
``kopf.on.mutate`` handler whose id is the hook's path, so kopf serves it at Volcano's URL
(``/queues/validate``). A handler reads the cluster from the scheduler's cache (waiting for the
first listing after a start), runs the pure rule and answers: a merge patch for kopf to turn into
the JSONPatch, or :class:`kopf.AdmissionError` with Volcano's message.

The webhook configurations are written here rather than by kopf's manager, which cannot set a
``namespaceSelector``: the pod webhooks must leave out kube-system and the scheduler's own
namespace, or a scheduler that is down would refuse the pods that bring it back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import kopf

from caldera.admission.hooks import Hook
from caldera.admission.pods import ADMIT_REASON, BudgetDenied
from caldera.admission.review import Denied, Missing, Options, Review, object_name
from caldera.cache.state import ClusterState
from caldera.k8s.resources import CREATED_LABELS, MUTATING, VALIDATING
from caldera.k8s.rest import Rest
from caldera.k8s.webhook_config import apply_configuration
from caldera.models.kinds import KINDS
from caldera.operator.metrics import Metrics
from caldera.operator.settings import Settings
from caldera.operator.watch.cache import Cache
from caldera.operator.webhooks.server import RETRY
from caldera.operator.writers.events import EventPoster

__all__ = ["CONFIGURATION_NAME", "Admission", "webhook_entries"]

log = logging.getLogger(__name__)

CONFIGURATION_NAME = "caldera-scheduler"
"""Name of the ValidatingWebhookConfiguration and of the MutatingWebhookConfiguration."""
SYNC_WAIT = 10.0
"""How long a request waits for the cache's first listing before it is refused."""
CATCH_UP = (0.05, 0.1, 0.2, 0.4, 0.8)
"""Waits before asking a rule again when an object it needs is not cached yet (1.55 s in all)."""
TIMEOUT_SECONDS = 10


def webhook_entries(
    hooks: list[Hook], settings: Settings, client_config: Mapping[str, Any], *, mutating: bool
) -> list[dict[str, Any]]:
    """The ``webhooks`` of one configuration, as Volcano's Helm chart writes them."""
    out: list[dict[str, Any]] = []
    for hook in hooks:
        if hook.mutating != mutating:
            continue
        kind = KINDS[hook.kind]
        config = dict(client_config)
        if "service" in config:
            config["service"] = {**config["service"], "path": hook.path}
        else:
            config["url"] = str(config["url"]).rstrip("/") + hook.path
        entry: dict[str, Any] = {
            "name": hook.name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": config,
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "rules": [
                {
                    "apiGroups": [kind.group],
                    "apiVersions": [kind.version],
                    "resources": [kind.plural],
                    "operations": list(hook.operations),
                    "scope": "*",
                }
            ],
            "sideEffects": "NoneOnDryRun",
            "timeoutSeconds": TIMEOUT_SECONDS,
        }
        if kind.namespaced:
            # kube-system and the scheduler's own namespace are left out, so that a scheduler
            # that is down never blocks the pods that would bring it back (a cluster-scoped
            # object has no namespace to select: the API server ignores a selector there)
            entry["namespaceSelector"] = {
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "NotIn",
                        "values": sorted({settings.webhook_namespace, "kube-system"}),
                    }
                ]
            }
        if mutating:
            entry["reinvocationPolicy"] = "Never"
        out.append(entry)
    return out


class Admission:
    """The enabled hooks' handlers, and the configurations kept in step with the server."""

    def __init__(
        self,
        settings: Settings,
        hooks: list[Hook],
        metrics: Metrics,
        cache: Callable[[], Cache | None],
        events: Callable[[], EventPoster | None],
    ) -> None:
        self.settings = settings
        self.hooks = hooks
        self.metrics = metrics
        self._cache = cache
        self._events = events
        self.options = Options(
            scheduler_names=tuple(settings.scheduler_names),
            default_queue=settings.default_queue,
            max_queue_depth=settings.max_queue_depth,
            root_protection=settings.enable_root_queue_protection,
            allocated_pods_check=settings.enable_queue_allocated_pods_check,
        )
        self._config: Mapping[str, Any] | None = None
        self._changed = asyncio.Event()

    def register(self, registry: kopf.OperatorRegistry) -> None:
        logging.getLogger("kopf.objects").addFilter(_quiet_refusals)
        for hook in self.hooks:
            kind = KINDS[hook.kind]
            on = kopf.on.mutate if hook.mutating else kopf.on.validate
            on(
                kind.group,
                kind.version,
                kind.plural,
                id=hook.id,
                operations=list(hook.operations),  # type: ignore[arg-type]
                registry=registry,
            )(self._handler(hook))

    def _handler(self, hook: Hook) -> Callable[..., Any]:
        async def handle(
            body: kopf.Body,
            old: Any,
            new: Any,
            operation: str | None,
            patch: kopf.Patch,
            dryrun: bool,
            **_: Any,
        ) -> None:
            await self.review(hook, body, old, new, operation or "", patch, dryrun)

        return handle

    async def _state(self) -> ClusterState:
        cache = self._cache()
        if cache is None:
            raise kopf.AdmissionError("the scheduler is starting; try again", code=503)
        try:
            await asyncio.wait_for(cache.synced.wait(), SYNC_WAIT)
        except TimeoutError:
            raise kopf.AdmissionError(
                "the scheduler has not listed the cluster yet; try again", code=503
            ) from None
        return cache.state

    async def review(
        self,
        hook: Hook,
        body: Mapping[str, Any],
        old: Any,
        new: Any,
        operation: str,
        patch: kopf.Patch,
        dryrun: bool,
    ) -> None:
        """Answer one request (kopf turns the patch and the exception into the response)."""
        meta = body.get("metadata") or {}
        counter = self.metrics.admission
        try:
            review = Review(
                operation=operation,
                name=str(meta.get("name") or ""),
                namespace=str(meta.get("namespace") or ""),
                obj=new if isinstance(new, Mapping) else {},
                old=old if isinstance(old, Mapping) else None,
                state=await self._state(),  # the cache's, kept current in place
                options=self.options,
            )
            for delay in (*CATCH_UP, None):
                try:
                    change = hook.rule(review)
                    break
                except Missing:
                    if delay is None:
                        raise
                    await asyncio.sleep(delay)
        except Denied as exc:
            counter.labels(webhook=hook.path, result="denied").inc()
            log.info("%s refused %s %s: %s", hook.path, operation, _named(meta), exc)
            if isinstance(exc, BudgetDenied) and not dryrun:  # Volcano's recordEvent
                self._event(meta, f"Create pod failed due to {exc}")
            raise kopf.AdmissionError(str(exc), code=400) from None
        except kopf.AdmissionError:
            counter.labels(webhook=hook.path, result="error").inc()
            raise
        except Exception as exc:  # a bug must refuse one request, not take the server down
            counter.labels(webhook=hook.path, result="error").inc()
            log.exception("%s failed on %s %s", hook.path, operation, _named(meta))
            raise kopf.AdmissionError(f"internal error in {hook.path}: {exc}", code=500) from None
        if change:
            patch.update(change)
            counter.labels(webhook=hook.path, result="patched").inc()
        else:
            counter.labels(webhook=hook.path, result="allowed").inc()

    def _event(self, meta: Mapping[str, Any], message: str) -> None:
        events = self._events()
        if events is None:
            return
        events.emit(
            kind="Pod",
            namespace=str(meta.get("namespace") or "default"),
            name=object_name(meta),
            uid="",
            type_="Warning",
            reason=ADMIT_REASON,
            message=message,
        )

    # -- the configurations ---------------------------------------------------------------

    def served(self, client_config: Mapping[str, Any]) -> None:
        """The server (re)started with this client config: write the configurations."""
        self._config = client_config
        self._changed.set()

    async def keep_configurations(self, rest: Callable[[], Rest | None]) -> None:
        """Write the configurations after each (re)start of the server, retrying failures."""
        while True:
            await self._changed.wait()
            self._changed.clear()
            attempt = 0
            while (client := rest()) is not None and self._config is not None:
                try:
                    await self.apply(client, self._config)
                    break
                except Exception as exc:  # noqa: BLE001 -- RBAC, outage: say it, retry
                    delay = RETRY[min(attempt, len(RETRY) - 1)]
                    attempt += 1
                    log.error(
                        "could not write the webhook configurations %s (%s); retrying in %.0fs",
                        CONFIGURATION_NAME,
                        exc,
                        delay,
                    )
                    await asyncio.sleep(delay)

    async def apply(self, rest: Rest, client_config: Mapping[str, Any]) -> None:
        for resource, mutating in ((VALIDATING, False), (MUTATING, True)):
            entries = webhook_entries(self.hooks, self.settings, client_config, mutating=mutating)
            await apply_configuration(rest, resource, CONFIGURATION_NAME, entries, CREATED_LABELS)
        log.info(
            "webhook configurations %s list %s",
            CONFIGURATION_NAME,
            ", ".join(hook.path for hook in self.hooks),
        )


def _quiet_refusals(record: logging.LogRecord) -> bool:
    """kopf logs each refusal as a failed handler, an error; a refusal is an answer (logged at
    info above), so those lines are dropped."""
    text = record.getMessage()
    return not (text.startswith("Webhook '") and "failed permanently" in text)


def _named(meta: Mapping[str, Any]) -> str:
    name = object_name(meta) or "?"
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)
