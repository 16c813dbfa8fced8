"""The scheduler policy, reloaded when its file changes.

The file is polled by content (ConfigMap volumes update through symlink swaps, so modification
times are unreliable). A new valid policy applies from the next session; an invalid one is
reported with the exact key at fault and the previous policy stays in force. What a policy says
that nothing reads is logged once per load, one line per place (``strict``: the policy is
invalid instead).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from caldera.errors import ConfigError
from caldera.framework.policy import Policy, default_policy, load_policy
from caldera.framework.registry import Registry

__all__ = ["PolicyHolder"]

log = logging.getLogger(__name__)


class PolicyHolder:
    def __init__(self, path: str | None, registry: Registry, *, strict: bool = False) -> None:
        self.path = Path(path) if path else None
        self.registry = registry
        self.strict = strict
        self._digest = ""
        self.policy: Policy = default_policy(registry)
        if self.path is not None:
            text = self.path.read_text(encoding="utf-8")
            self.policy = self._load(text)
            self._digest = hashlib.sha256(text.encode()).hexdigest()

    def _load(self, text: str) -> Policy:
        policy = load_policy(text, self.registry, source=str(self.path), strict=self.strict)
        for warning in policy.warnings:
            log.warning("policy: %s", warning)
        return policy

    def check(self) -> ConfigError | None:
        """Reload if the file changed; returns the error when the new content is invalid."""
        if self.path is None:
            return None
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            return ConfigError(f"cannot read policy file: {exc.strerror}", source=str(self.path))
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest == self._digest:
            return None
        self._digest = digest
        try:
            policy = self._load(text)
        except ConfigError as exc:
            return exc
        if added := sorted(policy.read_objects - self.policy.read_objects):
            named = ", ".join(f"{kind} {key}" for kind, key in added)
            log.warning("policy: %s not watched until the scheduler restarts", named)
        self.policy = policy
        log.info("policy reloaded from %s", self.path)
        return None

    async def watch(
        self, interval: float, on_error: Callable[[ConfigError], Awaitable[None]]
    ) -> None:
        while True:
            await asyncio.sleep(interval)
            error = self.check()
            if error is not None:
                log.error("invalid policy, keeping the previous one: %s", error)
                await on_error(error)
