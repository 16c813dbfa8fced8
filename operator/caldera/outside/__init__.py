"""Talking to systems other than the Kubernetes API: a metrics source for the ``usage`` plugin.

Kept apart from :mod:`caldera.k8s` (the API server) and from the engine, which never does I/O: the
operator refreshes what these systems say in the background and hands sessions the last answer.
"""
