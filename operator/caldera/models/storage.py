"""Storage kinds the volume filters read: PersistentVolume, PersistentVolumeClaim, StorageClass,
CSINode.

Only the fields kube-scheduler's VolumeBinding, VolumeZone and NodeVolumeLimits plugins look at are
modelled, with the API server's defaults where an omitted field means something (a StorageClass
binds ``Immediate``ly, a new PersistentVolume is ``Pending``, a claim without ``volumeMode`` is a
``Filesystem`` claim). :class:`StorageObjects` is what a snapshot carries of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from caldera.models.base import ApiModel, ObjectMeta, ResourceList
from caldera.models.core import NodeSelector
from caldera.models.names import is_label_value, is_qualified_name
from caldera.models.selectors import LabelSelector

__all__ = [
    "BETA_STORAGE_CLASS_ANNOTATION",
    "BIND_COMPLETED_ANNOTATION",
    "BOUND_BY_CONTROLLER_ANNOTATION",
    "NO_PROVISIONER",
    "SELECTED_NODE_ANNOTATION",
    "CSINode",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "StorageObjects",
    "TopologySelectorTerm",
    "claim_class",
    "volume_class",
]

BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
"""Set by the PV controller on a claim whose binding is complete."""
BOUND_BY_CONTROLLER_ANNOTATION = "pv.kubernetes.io/bound-by-controller"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
"""Set by the scheduler on a claim it wants provisioned for the node it names."""
BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
"""Still read before ``storageClassName`` (component-helpers' GetPersistentVolumeClaimClass)."""
NO_PROVISIONER = "kubernetes.io/no-provisioner"
"""A StorageClass provisioner that means "static volumes only"."""

AccessMode = Literal["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"]
VolumeMode = Literal["Filesystem", "Block"]


class TopologySelectorRequirement(ApiModel):
    key: str = Field(min_length=1)
    values: tuple[str, ...] = Field(min_length=1)


class TopologySelectorTerm(ApiModel):
    match_label_expressions: tuple[TopologySelectorRequirement, ...] = ()

    @property
    def valid(self) -> bool:
        """Whether kube can parse every requirement as an ``In`` label requirement
        (``TopologySelectorRequirementsAsSelector``); an invalid term matches nothing."""
        return all(
            is_qualified_name(r.key) and all(is_label_value(v) for v in r.values)
            for r in self.match_label_expressions
        )


class StorageClass(ApiModel):
    metadata: ObjectMeta
    provisioner: str = ""
    volume_binding_mode: Literal["Immediate", "WaitForFirstConsumer"] = "Immediate"
    allowed_topologies: tuple[TopologySelectorTerm, ...] = ()


class VolumeNodeAffinity(ApiModel):
    required: NodeSelector | None = None


class ClaimReference(ApiModel):
    """A PersistentVolume's ``claimRef``."""

    kind: str = ""
    api_version: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    resource_version: str = ""


class CSIVolumeSource(ApiModel):
    driver: str = Field(min_length=1)
    volume_handle: str = Field(min_length=1)


class PersistentVolumeSpec(ApiModel):
    capacity: ResourceList = Field(default_factory=dict)
    access_modes: tuple[AccessMode, ...] = ()
    storage_class_name: str = ""
    node_affinity: VolumeNodeAffinity | None = None
    claim_ref: ClaimReference | None = None
    csi: CSIVolumeSource | None = None
    volume_mode: VolumeMode | None = None
    volume_attributes_class_name: str | None = None


class PersistentVolumeStatus(ApiModel):
    phase: Literal["Pending", "Available", "Bound", "Released", "Failed"] = "Pending"


class PersistentVolume(ApiModel):
    metadata: ObjectMeta
    spec: PersistentVolumeSpec = Field(default_factory=PersistentVolumeSpec)
    status: PersistentVolumeStatus = Field(default_factory=PersistentVolumeStatus)

    @property
    def storage(self) -> int:
        """``capacity.storage`` in bytes (0 when unset)."""
        return int(self.spec.capacity.get("storage", 0))


class ClaimResources(ApiModel):
    requests: ResourceList = Field(default_factory=dict)


class PersistentVolumeClaimSpec(ApiModel):
    storage_class_name: str | None = None
    volume_name: str = ""
    resources: ClaimResources = Field(default_factory=ClaimResources)
    access_modes: tuple[AccessMode, ...] = ()
    selector: LabelSelector | None = None
    volume_mode: VolumeMode | None = None
    volume_attributes_class_name: str | None = None


class PersistentVolumeClaimStatus(ApiModel):
    phase: Literal["Pending", "Bound", "Lost"] = "Pending"


class PersistentVolumeClaim(ApiModel):
    metadata: ObjectMeta
    spec: PersistentVolumeClaimSpec = Field(default_factory=PersistentVolumeClaimSpec)
    status: PersistentVolumeClaimStatus = Field(default_factory=PersistentVolumeClaimStatus)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def request(self) -> int:
        """``resources.requests.storage`` in bytes (0 when unset)."""
        return int(self.spec.resources.requests.get("storage", 0))

    @property
    def fully_bound(self) -> bool:
        """Bound to a volume and the PV controller has finished the binding (kube's
        isPVCFullyBound): a ``volumeName`` alone is only a pre-binding."""
        return bool(self.spec.volume_name) and (
            BIND_COMPLETED_ANNOTATION in self.metadata.annotations
        )


class VolumeNodeResources(ApiModel):
    count: int | None = Field(None, ge=0)


class CSINodeDriver(ApiModel):
    name: str = Field(min_length=1)
    node_id: str = ""
    allocatable: VolumeNodeResources | None = None
    topology_keys: tuple[str, ...] = ()


class CSINodeSpec(ApiModel):
    drivers: tuple[CSINodeDriver, ...] = ()


class CSINode(ApiModel):
    """Per node and CSI driver, how many volumes it may attach (``allocatable.count``). A CSINode
    is named after its node."""

    metadata: ObjectMeta
    spec: CSINodeSpec = Field(default_factory=CSINodeSpec)


def claim_class(claim: PersistentVolumeClaim) -> str:
    """The claim's storage class: the beta annotation first, then ``storageClassName``."""
    beta = claim.metadata.annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
    if beta is not None:
        return beta
    return claim.spec.storage_class_name or ""


def volume_class(volume: PersistentVolume) -> str:
    beta = volume.metadata.annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
    return beta if beta is not None else volume.spec.storage_class_name


@dataclass(slots=True)
class StorageObjects:
    """The storage objects of one snapshot, keyed the way the filters look them up."""

    volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    """PersistentVolumes by name."""
    claims: dict[str, PersistentVolumeClaim] = field(default_factory=dict)
    """PersistentVolumeClaims by ``namespace/name``."""
    classes: dict[str, StorageClass] = field(default_factory=dict)
    """StorageClasses by name."""
    csi_nodes: dict[str, CSINode] = field(default_factory=dict)
    """CSINodes by name (which is their node's name)."""
