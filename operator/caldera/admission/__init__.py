"""Volcano's admission rules, as pure functions: an admission request and the cache in, a verdict
out. The operator serves them through kopf (:mod:`caldera.operator.webhooks`); nothing here does
I/O, so the same rules are tested without a server."""
