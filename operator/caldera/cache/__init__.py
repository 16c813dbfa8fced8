"""The scheduler's model of the cluster between sessions, and the bridge into the engine.

:class:`~caldera.cache.state.ClusterState` holds the validated API objects (filled from watch
events by the operator, or from manifests by ``caldera simulate``); :func:`build_snapshot` turns it
into a fresh engine snapshot for each session.
"""
