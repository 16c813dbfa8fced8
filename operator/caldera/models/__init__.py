"""What the Kubernetes API says: pydantic v2 models, used only at the boundary.

Manifests, watch events and policy files are validated here, once, with errors that name the
object and the field. Sub-structures that the engine needs as they are (tolerations, taints, node
selector terms) are frozen models reused by the engine rather than copied into twin types.
"""
