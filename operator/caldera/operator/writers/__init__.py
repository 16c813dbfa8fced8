"""The writers: binds, evictions, statuses and events, each through a keyed retry queue, and the
objects the scheduler creates itself (queues, PodGroups for bare pods when asked)."""
