"""The scheduler's own view of the cluster: plain, fast, synchronous types.

Everything here is what the engine reasons about (tasks, jobs, nodes, queues, the snapshot). Node
state lives in numpy arrays (nodes × resources) so filters and scores run over all nodes at once.
Nothing in this package does I/O or knows about Kubernetes clients.
"""
