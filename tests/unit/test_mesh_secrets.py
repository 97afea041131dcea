"""The mesh's TLS material and tokens (scripts/containers.py make_secrets, which `./dev containers up`
and `./dev k8s secrets` use): one key and certificate per identity, named for that identity alone,
for server and client use, signed by a CA whose key is kept nowhere; the tokens in the evaluator's
folder only. Made with the real openssl, read with `cryptography`, and tried with real gRPC TLS on
loopback: a service's certificate answers for its own name only."""
import os
from concurrent import futures

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from scripts import containers
from theval_mesh.rpc import probe
from theval_mesh.rpc.config import SERVICES
from theval_mesh.rpc.launcher import free_port
from theval_mesh.rpc.security import ClientSecurity, Tokens, client_channel, server_credentials

OWN = f"{os.getuid()}:{os.getgid()}"


def certificate(path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def public(key_or_cert) -> bytes:
    return key_or_cert.public_key().public_bytes(serialization.Encoding.DER,
                                                 serialization.PublicFormat.SubjectPublicKeyInfo)


def private_keys(folder):
    """{path: key} of every PEM private key below `folder`."""
    out = {}
    for path in folder.rglob("*"):
        if path.is_file() and b"PRIVATE KEY" in path.read_bytes():
            out[path] = serialization.load_pem_private_key(path.read_bytes(), None)
    return out


@pytest.fixture(scope="module")
def material(tmp_path_factory):
    return containers.make_secrets(tmp_path_factory.mktemp("secrets") / "secrets", user=OWN)


def test_each_service_has_its_own_key_and_a_certificate_for_its_name_alone(material):
    ca = certificate(material / "ca.crt")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    keys = private_keys(material)
    assert {p.relative_to(material).as_posix() for p in keys} == {f"{s}/tls.key" for s in SERVICES}
    assert len({public(k) for k in keys.values()}) == len(SERVICES)  # no key shared
    assert public(ca) not in {public(k) for k in keys.values()}  # the CA's key is not kept
    for service in SERVICES:
        own = material / service
        expected = {"tls.crt", "tls.key", "ca.crt"} | ({"tokens"} if service == "evaluator" else set())
        assert {p.name for p in own.iterdir()} == expected, service
        cert = certificate(own / "tls.crt")
        assert public(cert) == public(keys[own / "tls.key"]), service
        assert (own / "ca.crt").read_bytes() == (material / "ca.crt").read_bytes()
        ca.public_key().verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
        assert cert.issuer == ca.subject
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == service
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert set(san.get_values_for_type(x509.DNSName)) == {service, "localhost"}, service
        assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}, service
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.digital_signature
        assert (own.stat().st_mode & 0o777, (own / "tls.key").stat().st_mode & 0o777) == (0o700, 0o600)
    assert (material / "evaluator" / "tokens").stat().st_mode & 0o777 == 0o600
    assert (material / "token").stat().st_mode & 0o777 == 0o600
    tokens = Tokens.load(str(material / "evaluator" / "tokens"), {})
    token = (material / "token").read_text().strip()
    assert tokens.identity([("authorization", f"Bearer {token}")]) == "operator"


def test_kept_when_complete_and_made_whole_again_when_not(tmp_path):
    folder = containers.make_secrets(tmp_path / "secrets", user=OWN)
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert containers.make_secrets(folder, user=OWN) == folder
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    (folder / "audio" / "tls.key").unlink()
    (folder / "ca.key").write_text("an earlier layout kept the CA's key here")  # and one shared key
    (folder / "server.key").write_text("the earlier layout's shared key")
    containers.make_secrets(folder, user=OWN)
    assert not (folder / "ca.key").exists() and not (folder / "server.key").exists()
    assert (folder / "ca.crt").read_bytes() != before[folder / "ca.crt"]  # a new CA: nothing signed later
    for service in SERVICES:
        certificate(folder / "ca.crt").public_key().verify(
            certificate(folder / service / "tls.crt").signature,
            certificate(folder / service / "tls.crt").tbs_certificate_bytes,
            ec.ECDSA(certificate(folder / service / "tls.crt").signature_hash_algorithm))


@pytest.fixture
def landmarks_server(material):
    """A real gRPC server on loopback with the landmarks identity, requiring client certificates
    of the CA, as the landmarks container runs."""
    server = grpc.server(futures.ThreadPoolExecutor(2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    own = material / "landmarks"
    port = free_port()
    server.add_secure_port(f"127.0.0.1:{port}", server_credentials(str(own / "tls.crt"), str(own / "tls.key"),
                                                                   str(own / "ca.crt")))
    server.start()
    yield port
    server.stop(None)


def answers(port, security, name=None) -> bool:
    options = [("grpc.ssl_target_name_override", name)] if name else []
    with client_channel(f"127.0.0.1:{port}", security, options) as channel:
        try:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAVAILABLE, err
            return False
    return True


def test_a_service_answers_for_its_own_name_only_and_to_a_certificate_of_the_ca(material, landmarks_server):
    evaluator = material / "evaluator"
    as_evaluator = ClientSecurity(str(evaluator / "ca.crt"), str(evaluator / "tls.crt"), str(evaluator / "tls.key"))
    assert answers(landmarks_server, as_evaluator, "landmarks")  # how the evaluator reaches it
    for other in ("headpose", "quality", "audio", "evaluator"):  # its certificate is not theirs
        assert not answers(landmarks_server, as_evaluator, other), other
    assert not answers(landmarks_server, ClientSecurity(str(evaluator / "ca.crt")), "landmarks")  # no certificate
    # the container's own health probe: its certificate, as client certificate too
    own = material / "landmarks"
    assert probe.check({"THEVAL_PORT": str(landmarks_server), "THEVAL_TLS_CERT": str(own / "tls.crt"),
                        "THEVAL_TLS_KEY": str(own / "tls.key"), "THEVAL_TLS_CLIENT_CA": str(own / "ca.crt")}) == "SERVING"
