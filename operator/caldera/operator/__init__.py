"""``caldera run``: informers into the cache (``watch``), sessions on news (``loop``), API writers
(``writers``), wired together in ``app``; see docs/operator.md.

Everything here does I/O on one asyncio loop; the scheduling decisions themselves are made in a
process of their own (see :mod:`caldera.operator.loop.worker`).
"""
