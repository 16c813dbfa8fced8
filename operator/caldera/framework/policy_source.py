"""Where a policy comes from: the installed one, a policy file, or a ConfigMap manifest.

``manifests/`` installs the scheduler's policy in a ConfigMap under the key
``volcano-scheduler.conf``. The same text ships inside the package
(``caldera/policies/volcano-helm.yaml``; ``policies/volcano-helm.yaml`` links to it and a test
keeps the ConfigMap equal to it), so ``caldera simulate`` and ``caldera explain`` default to the
policy the installed scheduler runs. ``--policy`` takes either a bare policy file or a ConfigMap
manifest carrying one, such as ``manifests/30-configmap.yaml`` itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from caldera.errors import ConfigError
from caldera.framework.policy import Policy, load_policy
from caldera.framework.registry import Registry

__all__ = [
    "CONFIGMAP_KEY",
    "INSTALLED_POLICY",
    "installed_policy",
    "installed_policy_text",
    "read_policy",
]

CONFIGMAP_KEY = "volcano-scheduler.conf"
"""The ConfigMap key the scheduler's policy lives under (the file name it is mounted as)."""

INSTALLED_POLICY = "policies/volcano-helm.yaml"
"""The installed policy, as package data of ``caldera``."""


def installed_policy_text() -> str:
    return (files("caldera") / INSTALLED_POLICY).read_text(encoding="utf-8")


def installed_policy(registry: Registry) -> Policy:
    """The policy ``manifests/`` installs."""
    return load_policy(installed_policy_text(), registry, source="<installed policy>")


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read policy file: {exc.strerror}", source=path) from None
    except UnicodeDecodeError:
        raise ConfigError("not a text file (not UTF-8)", source=path) from None


def _configmaps(text: str) -> list[Mapping[str, Any]]:
    """The ConfigMap documents of a file; none when it is not YAML (the policy loader says why)."""
    try:
        docs = list(yaml.safe_load_all(text))
    except (yaml.YAMLError, RecursionError):
        return []
    return [d for d in docs if isinstance(d, Mapping) and d.get("kind") == "ConfigMap"]


def _name(cm: Mapping[str, Any]) -> str:
    meta = cm.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return "ConfigMap (without a name)"
    ns = meta.get("namespace")
    return f"ConfigMap {ns}/{meta['name']}" if isinstance(ns, str) else f"ConfigMap {meta['name']}"


def _data(cm: Mapping[str, Any]) -> Mapping[str, Any]:
    data = cm.get("data")
    return data if isinstance(data, Mapping) else {}


def read_policy(path: str, registry: Registry, *, strict: bool = False) -> Policy:
    """A policy file, or the policy in a ConfigMap manifest; ConfigError names file and key."""
    text = _read(path)
    configmaps = _configmaps(text)
    if not configmaps:
        return load_policy(text, registry, source=path, strict=strict)
    carrying = [cm for cm in configmaps if CONFIGMAP_KEY in _data(cm)]
    if not carrying:
        names = ", ".join(_name(cm) for cm in configmaps)
        raise ConfigError(f"{names} has no data key {CONFIGMAP_KEY!r}", source=path)
    if len(carrying) > 1:
        names = ", ".join(_name(cm) for cm in carrying)
        raise ConfigError(
            f"several ConfigMaps carry {CONFIGMAP_KEY!r} ({names}); pass a file with one",
            source=path,
        )
    (cm,) = carrying
    source = f"{path}: {_name(cm)}: data[{CONFIGMAP_KEY!r}]"
    value = _data(cm)[CONFIGMAP_KEY]
    if not isinstance(value, str):
        raise ConfigError("must be the policy as a string (use '|')", source=source)
    return load_policy(value, registry, source=source, strict=strict)
