"""The scheduler's model of the cluster, kept between sessions.

A snapshot built from nothing costs something for every pod and job in the cluster, however few
changed. The session process keeps a :class:`Model` instead: the jobs and their tasks, which jobs
are active and what the settled ones add up to per queue, the node accounting of every placed
pod, the pods that wait and why. Each session it applies what changed (the pods the watch brought,
the binds in flight) and hands the session a snapshot that costs what changed plus what is
active. A change that every pod or job reads (a node, a queue, a PodGroup, a priority class, a
new resource name) builds the model again from the state, as does every Nth session.
"""

from caldera.model.resident import FULL_REBUILD_EVERY, Model

__all__ = ["FULL_REBUILD_EVERY", "Model"]
