"""What a policy may say that Volcano ignores: warnings instead of errors, unless strict.

Volcano decodes ``volcano-scheduler.conf`` with a lenient YAML decoder and reads plugin arguments
by key, so a key nothing reads, an option written beside ``arguments:`` instead of inside it, a
plugin it does not have (``OpenSession`` logs "Failed to get plugin" and goes on), a
``configurations`` entry for an action it does not run and anything after a document end marker
(``...``) are all passed over. A drop-in replacement loads those files too: each such place
becomes a :class:`PolicyWarning` naming the exact key (and the nearest known key when one is
close), and the policy is built from the rest. Wrong values of keys that are read stay errors.
With ``strict`` (``caldera run --strict-policy``, ``simulate --strict``) the first warning is
raised as a :class:`~caldera.errors.ConfigError`, for CI.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from caldera.errors import ConfigError, yaml_problem
from caldera.framework.plugin import Args

__all__ = ["PolicyWarning", "Warnings", "first_document", "nearest", "validate_args"]


@dataclass(frozen=True, slots=True)
class PolicyWarning:
    """A place in the policy that is passed over, as Volcano passes over it."""

    key: str
    message: str
    source: str = ""

    def __str__(self) -> str:
        where = ": ".join(p for p in (self.source, self.key) if p)
        return f"{where}: {self.message}" if where else self.message


class Warnings:
    """The warnings of one policy load; in strict mode the first one is an error."""

    def __init__(self, source: str, *, strict: bool) -> None:
        self.source = source
        self.strict = strict
        self.found: list[PolicyWarning] = []

    def add(self, key: str, message: str, then: str = "ignored") -> None:
        """``message`` says what is wrong at ``key``; ``then``, what loading does about it."""
        if self.strict:
            raise ConfigError(
                f"{message} (refused: strict policy checking)", key=key, source=self.source
            )
        self.found.append(PolicyWarning(key, f"{message}; {then}", self.source))


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (ignoring case), if any is close: similar enough, or
    the same letters in another order (``gnag``)."""
    by_lower = {k.lower(): k for k in known}
    lower = name.lower()
    match = difflib.get_close_matches(lower, list(by_lower), n=1, cutoff=0.78)
    if match:
        return by_lower[match[0]]
    letters = sorted(lower)
    return next((k for low, k in by_lower.items() if sorted(low) == letters), None)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the nearest known name, or nothing."""
    close = nearest(name, known)
    return f" (did you mean {close!r}?)" if close is not None and close != name else ""


def first_document(text: str, source: str) -> Any:
    """The policy's first YAML document, as Volcano's decoder reads it: whatever follows a
    document end (``...``) or a second ``---`` is never parsed."""
    loader: yaml.SafeLoader | None = None
    try:
        loader = yaml.SafeLoader(text)  # the reader checks the characters here
        return loader.get_data() if loader.check_data() else None  # type: ignore[no-untyped-call]
    except yaml.YAMLError as exc:
        raise ConfigError(yaml_problem(exc), source=source) from None
    except RecursionError:
        raise ConfigError("invalid YAML: nested too deeply", source=source) from None
    finally:
        if loader is not None:
            loader.dispose()


def argument_keys(model: type[Args]) -> list[str]:
    """The argument keys a model reads, as the policy spells them."""
    return [f.alias or name for name, f in model.model_fields.items()]


def _path(loc: tuple[int | str, ...]) -> str:
    return "".join(f"[{p!r}]" if isinstance(p, str) else f"[{p}]" for p in loc)


def _drop(data: Any, loc: tuple[int | str, ...]) -> bool:
    """Remove the key at ``loc`` from nested maps and lists; whether it was there."""
    for part in loc[:-1]:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return False
    if isinstance(data, dict) and loc[-1] in data:
        del data[loc[-1]]
        return True
    return False


def validate_args(model: type[Args], raw: Any, key: str, warnings: Warnings) -> Args:
    """``raw`` validated by ``model``: keys the model does not read (at any depth) are warnings
    and dropped; any other fault is a ConfigError naming the exact key."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(
            "must be a map of argument name to value", key=key, source=warnings.source
        )
    data = copy.deepcopy(dict(raw))
    while True:
        try:
            args = model.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors()
            extra = [e for e in errors if e["type"] == "extra_forbidden"]
            if not extra:
                err = errors[0]
                raise ConfigError(
                    err["msg"], key=f"{key}{_path(err['loc'])}", source=warnings.source
                ) from None
            for err in extra:
                loc = err["loc"]
                if not _drop(data, loc):  # not a key of the input: nothing more to drop
                    raise ConfigError(
                        err["msg"], key=f"{key}{_path(loc)}", source=warnings.source
                    ) from None
                hint = did_you_mean(str(loc[-1]), argument_keys(model)) if len(loc) == 1 else ""
                warnings.add(f"{key}{_path(loc)}", f"nothing reads this key{hint}")
            continue
        for where, message, then in args.passed_over():
            warnings.add(f"{key}{where}", message, then)
        return args
