"""The operator shell: kopf watches into the cache, a timed session loop, async API writers.

Everything here does I/O on one asyncio loop; the scheduling decision itself runs in a worker
thread on an immutable copy of the cache (see :mod:`caldera.operator.scheduler`).
"""
