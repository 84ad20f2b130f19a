"""The certificates of a local control plane: one CA, serving and client certificates.

Kubernetes authenticates a client certificate's subject as the user (common name) in the groups
(organizations); ``system:masters`` is the administrators' group. Keys are ECDSA P-256: quick to
make, and every component accepts them.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import pathlib
import typing

from berth.util import extras

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ModuleNotFoundError as exc:
    raise extras.missing("emulator", exc) from exc

__all__ = ["Authority", "KeyPair", "write_private_key"]

_VALIDITY = datetime.timedelta(days=365)


@dataclasses.dataclass(frozen=True)
class KeyPair:
    """A certificate and its key, as PEM files."""

    cert: pathlib.Path
    key: pathlib.Path


def write_private_key(path: pathlib.Path) -> ec.EllipticCurvePrivateKey:
    """A new P-256 key written as PKCS#8 PEM (readable by the owner only)."""
    key = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    return key


class Authority:
    """A certificate authority in ``directory`` (``ca.crt``, ``ca.key``) that signs the rest."""

    def __init__(self, directory: pathlib.Path, *, name: str = "berth-local-ca") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = write_private_key(directory / "ca.key")
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.cert = directory / "ca.crt"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    @property
    def pem(self) -> bytes:
        return self._cert.public_bytes(serialization.Encoding.PEM)

    def serving(self, name: str, *, hosts: typing.Sequence[str]) -> KeyPair:
        """A server certificate for ``hosts`` (IP addresses or DNS names)."""
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        return self._issue(
            name,
            subject=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]),
            usage=ExtendedKeyUsageOID.SERVER_AUTH,
            alternative_names=names,
        )

    def client(self, name: str, *, user: str, groups: typing.Sequence[str] = ()) -> KeyPair:
        """A client certificate that authenticates as ``user`` in ``groups``."""
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
        return self._issue(
            name, subject=x509.Name(attributes), usage=ExtendedKeyUsageOID.CLIENT_AUTH
        )

    def _issue(
        self,
        name: str,
        *,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        alternative_names: typing.Sequence[x509.GeneralName] = (),
    ) -> KeyPair:
        pair = KeyPair(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        key = write_private_key(pair.key)
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if alternative_names:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(list(alternative_names)), critical=False
            )
        cert = builder.sign(self._key, hashes.SHA256())
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return pair
