"""Shared devices (GPUs) the HAMi way: what nodes register, what pods ask for, what they were given.

This package is the protocol half of GPU sharing, pure and vendor-neutral at its core
(:mod:`caldera.devices.model`), with one module per vendor that knows its annotations and
resource names (:mod:`caldera.devices.nvidia`). The scheduling half (fit, score, usage) builds on
these types.
"""
