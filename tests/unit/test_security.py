"""Tokens, names, clients' TLS and the refusal to serve beyond loopback without TLS and
authentication."""
import shutil
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tests.support.certificates import issue, make_ca
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.user_names import check_name
from theval_mesh.rpc import config
from theval_mesh.rpc.security import ClientSecurity, Tokens, client_channel, is_loopback, server_credentials

TOKEN = "t" * 32


def test_a_token_names_its_identity_and_nothing_else_does():
    tokens = Tokens.parse(f"# comment\nalice {TOKEN}\nbob {'u' * 32}\n", "test")
    assert tokens.identity([("authorization", f"Bearer {TOKEN}")]) == "alice"
    assert tokens.identity([("authorization", f"bearer {'u' * 32}")]) == "bob"
    for metadata in ([], [("authorization", TOKEN)], [("authorization", f"Basic {TOKEN}")],
                     [("authorization", f"Bearer {TOKEN[:-1]}")], [("authorization", "Bearer ")]):
        assert tokens.identity(metadata) is None, metadata
    assert TOKEN not in repr(tokens)
    assert TOKEN not in repr(ClientSecurity(token=TOKEN))


def test_kept_tokens_open_what_their_keeper_says_and_nothing_once_dropped():
    """Tokens kept elsewhere (the job store's, for submitted jobs): found by their digest, with
    the methods they may call; the callers' own tokens are checked first and call everything."""
    from theval_mesh.rpc.security import token_digest
    tokens = Tokens.parse(f"alice {TOKEN}", "test")
    job, other = "j" * 43, "k" * 43
    kept = {token_digest(job): ("theval-jobs/j1", frozenset({"/x/Evaluate"})),
            token_digest(other): ("theval-jobs/j2", frozenset({"/x/Evaluate"}))}
    tokens.trust(kept.get)
    assert tokens.lookup([("authorization", f"Bearer {job}")]) == ("theval-jobs/j1", frozenset({"/x/Evaluate"}))
    del kept[token_digest(job)]
    assert tokens.identity([("authorization", f"Bearer {job}")]) is None
    assert tokens.identity([("authorization", f"Bearer {other}")]) == "theval-jobs/j2"
    assert tokens.lookup([("authorization", f"Bearer {TOKEN}")]) == ("alice", None) and len(tokens) == 1
    assert tokens.identity([]) is None and token_digest(job) not in repr(tokens)


@pytest.fixture
def tls_server(tmp_path):
    """A real gRPC server (health) on loopback, serving TLS with a certificate for 127.0.0.1 and
    localhost signed by a CA of the test's: (port, the CA's file, the CA's certificate and key)."""
    ca, ca_cert, ca_key = make_ca(tmp_path, "ca")
    leaf = issue(tmp_path, "server", ca_cert, ca_key)
    server = grpc.server(futures.ThreadPoolExecutor(2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_secure_port("127.0.0.1:0", server_credentials(leaf.cert, leaf.key, None))
    server.start()
    yield port, ca.cert, (ca_cert, ca_key)
    server.stop(0)


def _answers(port: int, security: ClientSecurity) -> bool:
    with client_channel(f"127.0.0.1:{port}", security) as channel:
        try:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
            return True
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAVAILABLE, err
            return False


def test_a_portable_security_carries_the_ca_itself_and_no_key(tls_server, tmp_path):
    """What a job's Ray actors get (jobs.pipeline): on another machine there is no CA file to read."""
    port, ca_file, (ca_cert, ca_key) = tls_server
    client = issue(tmp_path, "client", ca_cert, ca_key)
    moved = tmp_path / "elsewhere" / "ca.crt"
    moved.parent.mkdir()
    shutil.copy(ca_file, moved)
    portable = ClientSecurity(str(moved), client.cert, client.key, TOKEN).portable()
    moved.unlink()  # the actor's machine: no such file
    assert portable.ca is None and portable.ca_pem.startswith(b"-----BEGIN CERTIFICATE")
    assert (portable.cert, portable.key, portable.token) == (client.cert, client.key, TOKEN)  # a key stays a path
    assert _answers(port, portable) and "BEGIN" not in repr(portable) and TOKEN not in repr(portable)
    assert ClientSecurity(token=TOKEN).portable() == ClientSecurity(token=TOKEN)  # plaintext stays plaintext


def test_a_server_dialled_by_address_is_checked_for_the_name_its_certificate_bears(tls_server):
    """A pod dialled by its IP has the Service's name in its certificate (THEVAL_TLS_SERVER_NAME)."""
    port, ca_file, _ = tls_server
    assert _answers(port, ClientSecurity(ca_file))  # 127.0.0.1 is in the certificate
    assert _answers(port, ClientSecurity(ca_file, server_name="localhost"))
    assert not _answers(port, ClientSecurity(ca_file, server_name="evaluator.theval.svc"))  # not in it
    env = ClientSecurity(ca_file, token=TOKEN, server_name="localhost").env()
    assert env["THEVAL_TLS_SERVER_NAME"] == "localhost" and ClientSecurity.from_env(env).server_name == "localhost"


def test_tokens_from_the_environment_and_bad_token_files(tmp_path):
    assert Tokens.load(None, {"THEVAL_TOKENS": f"alice {TOKEN}, bob {'u' * 32}"}).identity(
        [("authorization", f"Bearer {'u' * 32}")]) == "bob"
    assert not Tokens.load(None, {})
    with pytest.raises(UserError, match="shorter than"):
        Tokens.parse("alice short", "test")
    with pytest.raises(UserError, match="IDENTITY TOKEN"):
        Tokens.parse(f"alice {TOKEN} extra", "test")
    loose = tmp_path / "tokens"
    loose.write_text(f"alice {TOKEN}\n")
    loose.chmod(0o644)
    with pytest.raises(UserError, match="chmod 600"):
        Tokens.load(str(loose), {})


@pytest.mark.parametrize("name", ["GT", "Hallo2", "SadTalker v2 (256px)", "Élise/run#3", "a" * 128])
def test_names_people_give_models_are_accepted(name):
    assert check_name("model", name) == name


@pytest.mark.parametrize("name", ["", " GT", "GT ", "a" * 129, "two\nlines", "tab\tbed", "semi;colon", "x" * 5_000_000])
def test_names_outside_the_rules_are_refused_without_echoing_them(name):
    with pytest.raises(UserError) as err:
        check_name("model", name)
    assert len(str(err.value)) < 250


def test_loopback():
    assert all(map(is_loopback, ("127.0.0.1", "127.0.0.5", "::1", "[::1]", "localhost")))
    assert not any(map(is_loopback, ("0.0.0.0", "::", "10.0.0.1", "example.org")))


def _env(tmp_path, **extra):
    env = {"THEVAL_PORT": "0", "THEVAL_METRICS_PORT": "0", "THEVAL_ALLOWED_ROOTS": str(tmp_path),
           "THEVAL_STORE": str(tmp_path / "store.sqlite"),
           **{f"THEVAL_{d.upper()}_ADDR": "127.0.0.1:1" for d in config.DEPENDENCIES}}
    return {**env, **extra}


def test_admins_are_identities_with_tokens(tmp_path):
    tokens = {"THEVAL_TOKENS": f"alice {TOKEN}, ops {'u' * 32}, audit {'v' * 32}"}
    assert config.load("evaluator", environ=_env(tmp_path, **tokens)).admins == frozenset()
    c = config.load("evaluator", environ=_env(tmp_path, THEVAL_ADMINS="ops, audit", **tokens))
    assert c.admins == {"ops", "audit"} and c.tokens.identities == {"alice", "ops", "audit"}
    with pytest.raises(UserError, match=r"THEVAL_ADMINS: no token in --tokens-file .* for 'carol': give each admin"):
        config.load("evaluator", environ=_env(tmp_path, THEVAL_ADMINS="ops,carol", **tokens))
    with pytest.raises(UserError, match="no token in .* for 'ops'"):  # a server without tokens has no admins
        config.load("evaluator", environ=_env(tmp_path, THEVAL_ADMINS="ops"))


def test_nothing_listens_beyond_loopback_without_tls_and_authentication(tmp_path):
    cert, key, ca = (tmp_path / n for n in ("c.pem", "k.pem", "ca.pem"))
    for f in (cert, key, ca):
        f.write_text("PEM")
    tls = {"THEVAL_TLS_CERT": str(cert), "THEVAL_TLS_KEY": str(key)}
    with pytest.raises(UserError, match="TLS .* and bearer tokens"):
        config.load("evaluator", environ=_env(tmp_path, THEVAL_HOST="0.0.0.0"))
    with pytest.raises(UserError, match="bearer tokens"):
        config.load("evaluator", environ=_env(tmp_path, THEVAL_HOST="0.0.0.0", **tls))
    assert config.load("evaluator", environ=_env(tmp_path, THEVAL_HOST="0.0.0.0", THEVAL_TOKENS=f"a {TOKEN}", **tls))
    with pytest.raises(UserError, match="client certificates"):
        config.load("landmarks", environ=_env(tmp_path, THEVAL_HOST="0.0.0.0", **tls))
    assert config.load("landmarks", environ=_env(tmp_path, THEVAL_HOST="0.0.0.0", THEVAL_TLS_CLIENT_CA=str(ca), **tls))
    with pytest.raises(UserError, match="needs both"):
        config.load("landmarks", environ=_env(tmp_path, THEVAL_TLS_CERT=str(cert)))
    assert config.load("landmarks", environ=_env(tmp_path)).host == "127.0.0.1"  # the default needs nothing


def test_an_evaluator_on_all_interfaces_says_where_an_external_rays_workers_reach_it(tmp_path):
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    for f in (cert, key):
        f.write_text("PEM")
    secure = {"THEVAL_TLS_CERT": str(cert), "THEVAL_TLS_KEY": str(key), "THEVAL_TOKENS": f"a {TOKEN}"}
    ray = {"THEVAL_RAY_ADDRESS": "ray://theval-ray-head-svc:10001", **secure}
    with pytest.raises(UserError, match="THEVAL_RAY_ADDRESS=.* set --advertise-host"):
        config.load("evaluator", environ=_env(tmp_path, THEVAL_HOST="0.0.0.0", **ray))
    c = config.load("evaluator", environ=_env(tmp_path, THEVAL_HOST="0.0.0.0", THEVAL_ADVERTISE_HOST="10.1.2.3",
                                              THEVAL_ADVERTISE_TLS_NAME="evaluator", **ray))
    assert (c.advertise_host, c.advertise_tls_name) == ("10.1.2.3", "evaluator")
    assert config.load("evaluator", environ=_env(tmp_path, THEVAL_HOST="127.0.0.1", **ray))  # loopback: its own
    assert config.load("evaluator", environ=_env(tmp_path, THEVAL_HOST="0.0.0.0", **secure))  # a local Ray: loopback
    with pytest.raises(UserError, match="needs TLS"):
        config.load("evaluator", environ=_env(tmp_path, THEVAL_ADVERTISE_TLS_NAME="evaluator"))


def test_a_service_answers_the_certificate_names_it_allows_and_reads_nothing_before(tmp_path):
    """CallerInterceptor on a real mutual-TLS server (gRPC's own reflection service, unary and
    streaming): a CA-signed certificate of another name gets PERMISSION_DENIED, health still
    answers it, and the allowed name gets its answers."""
    from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

    from theval_mesh.rpc.security import CallerInterceptor, certificate_name
    ca, ca_cert, ca_key = make_ca(tmp_path, "ca")
    holders = {name: issue(tmp_path, name, ca_cert, ca_key) for name in ("evaluator", "audio", "mallory")}
    server = grpc.server(futures.ThreadPoolExecutor(4),
                         interceptors=[CallerInterceptor("landmarks", frozenset({"evaluator"}))])
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    reflection.enable_server_reflection([reflection.SERVICE_NAME], server)
    port = server.add_secure_port("127.0.0.1:0", server_credentials(holders["evaluator"].cert,
                                                                    holders["evaluator"].key, ca.cert))
    server.start()
    try:
        for name, holder in holders.items():
            assert certificate_name(holder.cert) == name
            with client_channel(f"127.0.0.1:{port}", ClientSecurity(ca.cert, holder.cert, holder.key)) as channel:
                health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)  # open
                stub = reflection_pb2_grpc.ServerReflectionStub(channel)
                ask = reflection_pb2.ServerReflectionRequest(list_services="")
                if name == "evaluator":
                    answer = next(iter(stub.ServerReflectionInfo(iter([ask]), timeout=5)))
                    assert answer.list_services_response.service
                    continue
                with pytest.raises(grpc.RpcError) as refused:
                    list(stub.ServerReflectionInfo(iter([ask]), timeout=5))
                assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
                assert f"answers evaluator only, and this caller's certificate names {name!r}" in refused.value.details()
    finally:
        server.stop(0)


def test_the_services_admit_the_evaluator_unless_told_otherwise(tmp_path):
    assert config.load("landmarks", environ=_env(tmp_path)).allowed_callers == {"evaluator"}
    assert config.load("evaluator", environ=_env(tmp_path)).allowed_callers == frozenset()  # tokens decide
    c = config.load("audio", environ=_env(tmp_path, THEVAL_ALLOWED_CALLERS="evaluator, evaluator-canary"))
    assert c.allowed_callers == {"evaluator", "evaluator-canary"}
    with pytest.raises(UserError, match="THEVAL_ALLOWED_CALLERS"):
        config.load("audio", environ=_env(tmp_path, THEVAL_ALLOWED_CALLERS="evaluator,bad name!"))


def test_the_job_identities_are_reserved():
    for identity in ("theval-jobs", "theval-jobs/job-1", "theval-jobsx"):
        with pytest.raises(UserError, match="reserved for the tokens the evaluator gives its submitted jobs"):
            Tokens.parse(f"{identity} {TOKEN}", "--tokens-file t")


def test_a_scoped_token_is_refused_every_other_method_unread(tmp_path):
    """AuthInterceptor on a real server: a kept token with its methods calls those only
    (PERMISSION_DENIED for the rest, before the request is read); a person's token calls all."""
    from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

    from theval_mesh.rpc.security import AuthInterceptor, token_digest
    tokens = Tokens.parse(f"alice {TOKEN}", "test")
    job = "j" * 40
    tokens.trust({token_digest(job): ("theval-jobs/job-1", frozenset({"/grpc.health.v1.Health/Check"}))}.get)
    server = grpc.server(futures.ThreadPoolExecutor(4), interceptors=[AuthInterceptor(tokens)])
    reflection.enable_server_reflection([reflection.SERVICE_NAME], server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        ask = reflection_pb2.ServerReflectionRequest(list_services="")
        outcomes = {}
        for who, token in (("alice", TOKEN), ("the job", job), ("nobody", None)):
            with client_channel(f"127.0.0.1:{port}", ClientSecurity(token=token)) as channel:
                try:
                    list(reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(iter([ask]), timeout=5))
                    outcomes[who] = grpc.StatusCode.OK
                except grpc.RpcError as err:
                    outcomes[who] = err.code()
        assert outcomes == {"alice": grpc.StatusCode.OK, "the job": grpc.StatusCode.PERMISSION_DENIED,
                            "nobody": grpc.StatusCode.UNAUTHENTICATED}
    finally:
        server.stop(0)
