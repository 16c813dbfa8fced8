"""``caldera simulate``: the real engine on plain manifests, with an in-memory cluster.

Reads Kubernetes manifests, does what the controllers would (PodGroups for bare pods), runs
scheduling cycles, applies binds as a kubelet would between cycles, and reports what happened.
"""
