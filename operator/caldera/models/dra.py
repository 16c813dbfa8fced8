"""Dynamic resource allocation kinds (``resource.k8s.io/v1``) the DynamicResources filter reads.

ResourceClaim, ResourceClaimTemplate, DeviceClass and ResourceSlice, with only the fields the
structured-parameters allocator of kube-scheduler looks at, and the API server's defaults where an
omitted field means something (a request allocates ``ExactCount`` devices, one by default).
:class:`DraObjects` is what a snapshot carries of them, with the pods' ``resourceClaimStatuses``
(which claim the ResourceClaim controller created for each template reference).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from caldera.models.base import ApiModel, ObjectMeta
from caldera.models.core import NodeSelector

__all__ = [
    "RESERVED_FOR_MAX_SIZE",
    "AllocationResult",
    "Device",
    "DeviceAttribute",
    "DeviceClass",
    "DeviceRequest",
    "DeviceRequestAllocationResult",
    "DeviceSelector",
    "DeviceSubRequest",
    "DraObjects",
    "ExactDeviceRequest",
    "ResourceClaim",
    "ResourceClaimConsumerReference",
    "ResourceClaimTemplate",
    "ResourceSlice",
]

RESERVED_FOR_MAX_SIZE = 256
"""ResourceClaimReservedForMaxSize: at most this many consumers may share a claim."""

AllocationMode = Literal["ExactCount", "All"]


class CELDeviceSelector(ApiModel):
    expression: str


class DeviceSelector(ApiModel):
    cel: CELDeviceSelector | None = None


class ExactDeviceRequest(ApiModel):
    device_class_name: str = ""
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: AllocationMode = "ExactCount"
    count: int = Field(1, ge=1)
    admin_access: bool | None = None


class DeviceSubRequest(ExactDeviceRequest):
    """One alternative of a ``firstAvailable`` request (DRAPrioritizedList)."""

    name: str = Field(min_length=1)


class DeviceRequest(ApiModel):
    name: str = Field(min_length=1)
    exactly: ExactDeviceRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()


class DeviceConstraint(ApiModel):
    requests: tuple[str, ...] = ()
    match_attribute: str | None = None


class DeviceClaim(ApiModel):
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()


class ResourceClaimSpec(ApiModel):
    devices: DeviceClaim = Field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(ApiModel):
    request: str
    driver: str
    pool: str
    device: str


class DeviceAllocationResult(ApiModel):
    results: tuple[DeviceRequestAllocationResult, ...] = ()


class AllocationResult(ApiModel):
    devices: DeviceAllocationResult = Field(default_factory=DeviceAllocationResult)
    node_selector: NodeSelector | None = None


class ResourceClaimConsumerReference(ApiModel):
    api_group: str = ""
    resource: str = ""
    name: str = ""
    uid: str = ""


class ResourceClaimStatus(ApiModel):
    allocation: AllocationResult | None = None
    reserved_for: tuple[ResourceClaimConsumerReference, ...] = ()


class ResourceClaim(ApiModel):
    metadata: ObjectMeta
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = Field(default_factory=ResourceClaimStatus)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"


class ResourceClaimTemplateSpec(ApiModel):
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(ApiModel):
    """Read for completeness of manifests: the ResourceClaim controller, not the scheduler,
    creates claims from it."""

    metadata: ObjectMeta
    spec: ResourceClaimTemplateSpec = Field(default_factory=ResourceClaimTemplateSpec)


class DeviceClassSpec(ApiModel):
    selectors: tuple[DeviceSelector, ...] = ()


class DeviceClass(ApiModel):
    metadata: ObjectMeta
    spec: DeviceClassSpec = Field(default_factory=DeviceClassSpec)


class DeviceAttribute(ApiModel):
    """Exactly one of the four values is set."""

    int_: int | None = Field(None, alias="int")
    bool_: bool | None = Field(None, alias="bool")
    string: str | None = None
    version: str | None = None


class DeviceCapacity(ApiModel):
    value: str | int


class Device(ApiModel):
    name: str = Field(min_length=1)
    attributes: dict[str, DeviceAttribute] = Field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = Field(default_factory=dict)
    allow_multiple_allocations: bool | None = None


class ResourcePool(ApiModel):
    name: str = Field(min_length=1)
    generation: int = 0
    resource_slice_count: int = Field(1, ge=1)


class ResourceSliceSpec(ApiModel):
    driver: str = Field(min_length=1)
    pool: ResourcePool
    node_name: str | None = None
    all_nodes: bool | None = None
    node_selector: NodeSelector | None = None
    per_device_node_selection: bool | None = None
    devices: tuple[Device, ...] = ()


class ResourceSlice(ApiModel):
    metadata: ObjectMeta
    spec: ResourceSliceSpec


@dataclass(slots=True)
class DraObjects:
    """The DRA objects of one snapshot, keyed the way the filter looks them up."""

    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    """ResourceClaims by ``namespace/name``."""
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    """DeviceClasses by name."""
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    """ResourceSlices by name."""
    claim_statuses: dict[str, dict[str, str | None]] = field(default_factory=dict)
    """Per pod (``namespace/name``), its ``status.resourceClaimStatuses``: pod claim name → the
    generated claim's name (None: the controller decided no claim is needed)."""
