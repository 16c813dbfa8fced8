"""Caldera: a Volcano-compatible batch scheduler for Kubernetes.

The engine (:mod:`caldera.framework`, :mod:`caldera.actions`, :mod:`caldera.plugins`,
:mod:`caldera.api`) is pure and synchronous; the command line and the operator shell do the I/O.
"""

__version__ = "0.1.0"
