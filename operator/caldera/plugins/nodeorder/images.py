"""ImageLocality: prefer nodes that already hold the pod's container images, kube's formula.

For each of the pod's containers (init and regular) whose image the node has, the image's size
is scaled by the share of nodes that have it (so an image on every node counts less than a rare
one already here: "spread" images do not pull pods together). The sum is clamped to
[23 MiB, 1000 MiB × containers] and mapped linearly onto 0–100. Image names are compared as kube
normalises them: a name without a tag or digest gets ``:latest``.

Node images do not change within a session, so the score of every node is computed once per
distinct image list. Complexity per task: a dictionary lookup (plus O(I·N) for an unseen list
of I images).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from caldera.api.node import NodeTable
from caldera.api.resources import Vector
from caldera.api.task import Task
from caldera.framework.interfaces import IntArray

__all__ = ["image_locality", "normalized_image_name"]

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB
MAX = 100


def normalized_image_name(name: str) -> str:
    """kube's normalisation: ``nginx`` → ``nginx:latest``; tags and digests are kept."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def _image_columns(table: NodeTable) -> tuple[dict[str, Vector], dict[str, float]]:
    """(per normalised image name, its size on every node (0: not there); per image, how
    many nodes hold it: kube's ImageStateSummary). Read only: shared by every session on these
    nodes."""
    n = len(table)
    sizes: dict[str, Vector] = {}
    holders: dict[str, set[int]] = {}
    for row, images in enumerate(table.images):
        for name, size in images.items():
            key = normalized_image_name(name)
            column = sizes.get(key)
            if column is None:
                column = sizes[key] = np.zeros(n, dtype=np.float64)
            column[row] = size
            holders.setdefault(key, set()).add(row)
    for column in sizes.values():
        column.flags.writeable = False
    return sizes, {name: float(len(rows)) for name, rows in holders.items()}


def image_locality(table: NodeTable) -> Callable[[Task, IntArray], Vector | float]:
    n = len(table)
    sizes, spread = table.derived("image columns", lambda: _image_columns(table))
    cache: dict[tuple[str, ...], Vector] = {}

    def all_nodes(images: tuple[str, ...]) -> Vector:
        total = np.zeros(n, dtype=np.float64)
        for image in images:
            column = sizes.get(normalized_image_name(image))
            if column is not None:
                # int64(float64(size) * numNodes / totalNumNodes), per container
                total += np.trunc(column * (spread[normalized_image_name(image)] / n))
        max_threshold = MAX_CONTAINER_THRESHOLD * len(images)
        clamped = np.clip(total, MIN_THRESHOLD, max_threshold)
        score: Vector = np.floor_divide(
            MAX * (clamped - MIN_THRESHOLD), max_threshold - MIN_THRESHOLD
        )
        return score

    def score(task: Task, idx: IntArray) -> Vector | float:
        spec = task.spec
        images = tuple(c.image for c in (*spec.init_containers, *spec.containers))
        if not any(normalized_image_name(image) in sizes for image in images):
            return 0.0  # no node holds any of them: the sum is below the threshold everywhere
        hit = cache.get(images)
        if hit is None:
            hit = cache[images] = all_nodes(images)
        return hit[idx]

    return score
