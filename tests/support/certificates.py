"""Real X.509 certificates for the TLS tests, made with the `cryptography` package: a CA, a
certificate it signs for 127.0.0.1/localhost (server and client use), and a stranger's CA."""
import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Pair:
    cert: str
    key: str


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(folder: Path, stem: str, cert, key) -> Pair:
    c, k = folder / f"{stem}.crt", folder / f"{stem}.key"
    c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    k.chmod(0o600)
    return Pair(str(c), str(k))


def _sign(subject: str, key, issuer_name, issuer_key, ca: bool):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage(
            [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_ca(folder: Path, stem: str) -> tuple[Pair, object, object]:
    """(files, certificate, key) of a new self-signed CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _sign(stem, key, _name(stem), key, ca=True)
    return _write(folder, stem, cert, key), cert, key


def issue(folder: Path, stem: str, ca_cert, ca_key) -> Pair:
    """A certificate for 127.0.0.1 and localhost, signed by the CA, usable by servers and clients."""
    key = ec.generate_private_key(ec.SECP256R1())
    return _write(folder, stem, _sign(stem, key, ca_cert.subject, ca_key, ca=False), key)
