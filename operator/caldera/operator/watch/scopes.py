"""Which informer holds an object, for the kinds listed and watched by several label selectors.

A kind read only by label selectors (:attr:`~caldera.models.kinds.Kind.label_selectors`:
MindCluster's ConfigMaps, labelled ``mx-consumer-volcano=true`` or ``mx-consumer-cim=true``) has
one informer per selector, each seeing only the objects its selector picks. An object may be seen
by both, and leaves one informer's view (a ``DELETED`` event, a relist without it) when it is
deleted or when its labels stop matching that selector: the cache keeps it while another
informer still holds it. Each informer's first listing counts apart towards the cache's sync.
"""

from __future__ import annotations

from collections.abc import Iterable

from caldera.models.kinds import Kind

__all__ = ["Scopes"]


class Scopes:
    """The selectors holding each object of the selector-read kinds, and the listings still
    to come (``(kind name, selector)``; ``""`` for a kind read whole)."""

    __slots__ = ("_held", "unsynced")

    def __init__(self, kinds: Iterable[Kind]) -> None:
        self._held: dict[str, set[str]] = {}
        """``<Kind>/<key>`` → the selectors whose informers hold it."""
        self.unsynced: set[tuple[str, str]] = {
            (kind.name, selector) for kind in kinds for selector in kind.selectors
        }

    def kept(self, kind: Kind, key: str, selector: str, event: str) -> bool:
        """Note that ``selector``'s informer has (``ADDED``, ``MODIFIED``) or no longer has
        (``DELETED``) the object at ``key``; True when it is gone from that informer's view but
        another one still holds it (the cache keeps it). Always False for a kind read whole."""
        if kind.whole:
            return False
        name = f"{kind.name}/{key}"
        held = self._held.setdefault(name, set())
        if event != "DELETED":
            held.add(selector)
            return False
        held.discard(selector)
        if held:
            return True
        del self._held[name]
        return False

    def listed(self, kind: Kind, selector: str) -> bool:
        """``selector``'s informer of ``kind`` has listed; True once every informer has."""
        self.unsynced.discard((kind.name, selector))
        return not self.unsynced
