"""Several schedulers on one cluster: which nodes and which jobs are this instance's.

Volcano lets a cluster run more than one scheduler three ways, all through the API server; this
package holds the pure part of them: :mod:`~caldera.sharding.ring` (the hash ring Volcano's
multi-scheduler StatefulSet splits jobs and nodes with) and :mod:`~caldera.sharding.scope` (what
one instance is responsible for: a node selector, its slot on the ring).
"""
