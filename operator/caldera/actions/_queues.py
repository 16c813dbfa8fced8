"""A priority queue keyed by the session's order functions, shared by the actions.

Keys are computed when an item is pushed, which matches Volcano's heap: an item's order only
changes through allocations to that item, and an item is re-pushed after it changes.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

__all__ = ["OrderedQueue"]

T = TypeVar("T")


class OrderedQueue(Generic[T]):
    __slots__ = ("_counter", "_heap", "_key")

    def __init__(self, key: Callable[[T], Any], items: Iterable[T] = ()) -> None:
        self._key = key
        self._counter = itertools.count()
        self._heap: list[tuple[Any, int, T]] = [(key(i), next(self._counter), i) for i in items]
        heapq.heapify(self._heap)

    def push(self, item: T) -> None:
        heapq.heappush(self._heap, (self._key(item), next(self._counter), item))

    def pop(self) -> T:
        return heapq.heappop(self._heap)[2]

    def drain(self) -> list[T]:
        """Every item, in order; the queue is left empty."""
        out = [heapq.heappop(self._heap)[2] for _ in range(len(self._heap))]
        return out

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)
