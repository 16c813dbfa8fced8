"""Every device dialect Caldera reads, written once; and reading a node's cards with it.

Adding a vendor is one module that builds a :class:`~caldera.devices.vendor.Vendor` and one entry
here.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from caldera.devices.hygon import HYGON_DCU
from caldera.devices.model import Card, RegistrationError
from caldera.devices.nvidia import NVIDIA
from caldera.devices.vendor import Vendor
from caldera.devices.volcano_vgpu import VOLCANO_VGPU

__all__ = ["VENDORS", "node_cards"]

VENDORS: tuple[Vendor, ...] = (NVIDIA, VOLCANO_VGPU, HYGON_DCU)
"""HAMi's NVIDIA dialect, Volcano's own vGPU dialect, and HAMi's Hygon DCU."""


@functools.lru_cache(maxsize=4096)
def _cards(vendor: Vendor, text: str) -> tuple[Card, ...] | str:
    try:
        return tuple(vendor.read_cards(text))
    except RegistrationError as exc:
        return str(exc)


def node_cards(vendor: Vendor, annotations: Mapping[str, str]) -> tuple[Card, ...] | str:
    """The cards a node registers for ``vendor`` (empty: none), or why the registration cannot
    be read. Parsed once per distinct registration text."""
    text = annotations.get(vendor.register_annotation)
    if text is None:
        return ()
    return _cards(vendor, text)
