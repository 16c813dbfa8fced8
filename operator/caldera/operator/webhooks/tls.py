"""The webhook server's self-signed certificate: made once, kept in a Secret, shared by replicas.

The API server checks the webhook's certificate against the ``caBundle`` of the webhook
configurations, and every replica patches those configurations with its own bundle. Replicas that
each made a certificate of their own would take turns breaking each other's TLS, so the first one
to start makes it and stores it in a Secret (``kubernetes.io/tls``); the others read it from there.
"""

from __future__ import annotations

import datetime
import ipaddress
from typing import NamedTuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["VALID_FOR", "Certificate", "self_signed", "service_names"]

VALID_FOR = datetime.timedelta(days=3650)
"""How long a made certificate lasts: delete the Secret and restart to make a new one."""


class Certificate(NamedTuple):
    """A PEM certificate and its private key."""

    cert: bytes
    key: bytes


def service_names(service: str, namespace: str) -> list[str]:
    """The names the API server may use for a Service (``<svc>.<ns>.svc`` is the one it uses)."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def self_signed(names: list[str], *, now: datetime.datetime | None = None) -> Certificate:
    """A certificate for ``names`` (DNS names or IP addresses) that is its own CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    sans: list[x509.GeneralName] = []
    for name in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    start = (now or datetime.datetime.now(datetime.UTC)) - datetime.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + VALID_FOR)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Certificate(
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
