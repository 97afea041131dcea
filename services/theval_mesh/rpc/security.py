"""Who may call a mesh server, and how clients reach one: TLS (mutual TLS as an option), bearer
tokens for the evaluator's API, the caller's identity, names a caller may give things.

Tokens come from a file (--tokens-file: one "IDENTITY TOKEN" per line) or the environment
(THEVAL_TOKENS: the same lines, or pairs separated by commas). They are kept as SHA-256 digests,
compared in constant time with every entry, and never logged. Health checks answer without a
token (Kubernetes probes); everything else needs one when tokens are configured.
"""
import hashlib
import hmac
import ipaddress
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

import grpc

from theval_mesh.pure.errors import UserError
from theval_mesh.pure.user_names import check_name

HEADER = "authorization"
# The identities of submitted jobs' own tokens, theval-jobs/JOB_ID: reserved, no tokens file may use them.
JOB_TOKENS = "theval-jobs"
OPEN_METHODS = ("/grpc.health.v1.Health/",)
MIN_TOKEN_CHARS = 24
ANONYMOUS = ""  # the identity of every caller of a server without tokens (loopback only)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """A host that means every interface (0.0.0.0, ::, or none)."""
    return host.strip("[]") in ("", "0.0.0.0", "::")


def job_identity(job_id: str) -> str:
    return f"{JOB_TOKENS}/{job_id}"


def job_of(identity: str | None) -> str | None:
    """The job id of a job token's identity (job_identity), None for any other identity."""
    prefix = JOB_TOKENS + "/"
    return identity[len(prefix):] if identity and identity.startswith(prefix) else None


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def token_digest(token: str) -> str:
    """How a token is kept where it must outlive this process (the job store): its SHA-256, hex."""
    return _digest(token).hex()


class Tokens:
    """Accepted bearer tokens: the callers' (from a file or the environment), each standing for an
    identity that may call every method, and the tokens kept elsewhere (`trust`: the submitted
    jobs' tokens in the job store), each with its identity and the methods it may call."""

    def __init__(self, pairs: list[tuple[str, str]]):
        self._entries = [(_digest(token), identity) for identity, token in pairs]
        self._kept = None  # digest (hex) -> (identity, methods) or None

    def trust(self, kept):
        """Also accept the tokens kept(digest) knows: kept(token_digest(token)) -> (identity,
        methods it may call) or None."""
        self._kept = kept

    def __len__(self):
        return len(self._entries)

    @property
    def identities(self) -> frozenset:
        return frozenset(identity for _, identity in self._entries)

    def __bool__(self):
        return bool(self._entries)

    def __repr__(self):  # never the tokens, not even their digests
        return f"Tokens({len(self._entries)} identities)"

    @classmethod
    def parse(cls, text: str, origin: str) -> "Tokens":
        pairs = []
        for n, line in enumerate(re.split(r"[\n,]", text), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) != 2:
                raise UserError(f"{origin}: entry {n}: expected 'IDENTITY TOKEN'")
            identity, token = fields
            check_name(f"{origin}: entry {n}: identity", identity)
            if identity.startswith(JOB_TOKENS):
                raise UserError(f"{origin}: entry {n}: identities starting with {JOB_TOKENS!r} are reserved for the "
                                "tokens the evaluator gives its submitted jobs; name this one otherwise")
            if len(token) < MIN_TOKEN_CHARS:
                raise UserError(f"{origin}: entry {n}: the token of {identity!r} is shorter than {MIN_TOKEN_CHARS} "
                                "characters; make one with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`")
            pairs.append((identity, token))
        if not pairs:
            raise UserError(f"{origin}: no tokens in it")
        return cls(pairs)

    @classmethod
    def load(cls, path: str | None, environ) -> "Tokens":
        """From --tokens-file (readable by its owner only, as ssh keys are) or THEVAL_TOKENS."""
        if path:
            p = Path(path).expanduser()
            if not p.is_file():
                raise UserError(f"--tokens-file {path}: no such file")
            if p.stat().st_mode & 0o077:
                raise UserError(f"--tokens-file {path}: readable by others; run `chmod 600 {path}`")
            return cls.parse(p.read_text(), f"--tokens-file {path}")
        text = environ.get("THEVAL_TOKENS", "")
        return cls.parse(text, "THEVAL_TOKENS") if text.strip() else cls([])

    def lookup(self, metadata) -> tuple[str, frozenset | None] | None:
        """(identity, the methods it may call or None for all) of a call's `authorization: Bearer
        TOKEN`, None if absent or unknown. Every entry is compared, whatever matches, so the time
        taken says nothing."""
        value = dict(metadata or ()).get(HEADER, "")
        scheme, _, token = value.partition(" ")
        presented = _digest(token.strip()) if scheme.lower() == "bearer" else b""
        found = None
        for digest, identity in self._entries:
            if hmac.compare_digest(digest, presented) and found is None:
                found = (identity, None)
        if found is None and presented and self._kept is not None:
            found = self._kept(presented.hex())
        return found

    def identity(self, metadata) -> str | None:
        """The identity of a call's token, None if absent or unknown."""
        found = self.lookup(metadata)
        return found[0] if found else None


def caller(tokens: Tokens, context) -> str:
    """The identity of the call being served (ANONYMOUS on a server without tokens)."""
    if not tokens:
        return ANONYMOUS
    return tokens.identity(context.invocation_metadata()) or ANONYMOUS


class AuthInterceptor(grpc.ServerInterceptor):
    """Refuses every call but health checks without a known bearer token: UNAUTHENTICATED, from
    the call's metadata alone. The refusal takes its request as a stream and never reads it: a
    unary handler would make the server receive the whole message first (up to the receive limit,
    65 MiB on the evaluator) before refusing it; unread, the rest stays with the client (HTTP/2
    flow control, rpc.server's windows)."""

    def __init__(self, tokens: Tokens):
        self.tokens = tokens

    def intercept_service(self, continuation, details):
        if details.method.startswith(OPEN_METHODS):
            return continuation(details)
        found = self.tokens.lookup(details.invocation_metadata)
        if found and (found[1] is None or details.method in found[1]):
            return continuation(details)
        handler = continuation(details)
        return None if handler is None else \
            _as_request_stream(handler, _refuse_unread if found is None else _refuse_out_of_scope)


def certificate_name(path: str) -> str | None:
    """The common name of the (first) certificate of a PEM file. Python's ssl module has no public
    parser for a certificate it does not hold a connection with; this one has been in CPython
    since 2.7 and stays (its tests use it)."""
    import ssl
    try:
        subject = ssl._ssl._test_decode_cert(str(Path(path).expanduser()))["subject"]
    except (OSError, ssl.SSLError, KeyError) as err:
        raise UserError(f"{path}: cannot read a certificate from it ({err})") from None
    return next((value for rdn in subject for key, value in rdn if key == "commonName"), None)


def peer_name(context) -> str | None:
    """The common name of the certificate the caller presented (mutual TLS), None without one."""
    names = context.auth_context().get("x509_common_name") or []
    return names[0].decode(errors="replace") if names else None


class CallerInterceptor(grpc.ServerInterceptor):
    """Mutual TLS says the caller holds a certificate the mesh's CA signed; this says which of
    those may call: every call but health checks needs a certificate named in `allowed` (its
    common name), else PERMISSION_DENIED. The check runs before the request is read: every method
    is served as a request stream, a unary one reading its one message after the check."""

    def __init__(self, service: str, allowed: frozenset):
        self.service, self.allowed = service, allowed

    def _check(self, context):
        name = peer_name(context)
        if name not in self.allowed:
            context.abort(grpc.StatusCode.PERMISSION_DENIED,
                          f"the {self.service} service answers {', '.join(sorted(self.allowed))} only, and this "
                          f"caller's certificate names {name!r} (its allowed callers: --allowed-callers)")

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or details.method.startswith(OPEN_METHODS):
            return handler
        inner = handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
        unary_request = not handler.request_streaming

        def checked(requests, context):
            self._check(context)
            return inner(next(requests) if unary_request else requests, context)
        return _as_request_stream(handler, checked)


def _as_request_stream(handler, behaviour):
    """`handler`'s method served by behaviour(requests, context), its request a stream: nothing is
    read before behaviour reads it (a unary handler would receive the whole message first)."""
    kind = grpc.stream_stream_rpc_method_handler if handler.response_streaming else \
        grpc.stream_unary_rpc_method_handler
    return kind(behaviour, handler.request_deserializer, handler.response_serializer)


def _refuse_unread(requests, context):
    context.abort(grpc.StatusCode.UNAUTHENTICATED,
                  "missing or unknown bearer token: send 'authorization: Bearer TOKEN'")


def _refuse_out_of_scope(requests, context):
    context.abort(grpc.StatusCode.PERMISSION_DENIED,
                  "this token is a submitted job's: it scores that job's videos (Evaluate, Describe) and nothing else")


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as err:
        raise UserError(f"{what} {path}: {err.strerror}") from None


def server_credentials(cert: str | None, key: str | None, client_ca: str | None):
    """TLS credentials of a server (None: plaintext); with client_ca, clients must present a
    certificate it signed (mutual TLS)."""
    if not cert:
        return None
    return grpc.ssl_server_credentials([(_read(key, "--tls-key"), _read(cert, "--tls-cert"))],
                                       root_certificates=_read(client_ca, "--tls-client-ca") if client_ca else None,
                                       require_client_auth=bool(client_ca))


@dataclass(frozen=True)
class ClientSecurity:
    """How a client reaches a server: TLS trusting the CA certificate of the file `ca` (or that
    certificate itself, `ca_pem`; neither: plaintext), a client certificate for mutual TLS, a
    bearer token, and the name the server's certificate must bear when it is not the host dialled
    (`server_name`: e.g. a Service's name for a pod dialled by its IP)."""
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    token: str | None = None
    server_name: str | None = None
    ca_pem: bytes | None = None

    def __repr__(self):
        return (f"ClientSecurity(ca={self.ca or ('<pem>' if self.ca_pem else None)!r}, cert={self.cert!r}, "
                f"server_name={self.server_name!r}, token={'set' if self.token else None})")

    @property
    def tls(self) -> bool:
        return bool(self.ca or self.ca_pem)

    @classmethod
    def from_env(cls, environ=None) -> "ClientSecurity":
        """THEVAL_TLS_CA, THEVAL_TLS_CLIENT_CERT/KEY, THEVAL_TOKEN (or THEVAL_TOKEN_FILE),
        THEVAL_TLS_SERVER_NAME."""
        env = os.environ if environ is None else environ
        token = env.get("THEVAL_TOKEN") or None
        if not token and env.get("THEVAL_TOKEN_FILE"):
            token = _read(env["THEVAL_TOKEN_FILE"], "THEVAL_TOKEN_FILE").decode().strip()
        return cls(env.get("THEVAL_TLS_CA") or None, env.get("THEVAL_TLS_CLIENT_CERT") or None,
                   env.get("THEVAL_TLS_CLIENT_KEY") or None, token, env.get("THEVAL_TLS_SERVER_NAME") or None)

    def env(self) -> dict:
        """The environment that gives a child process this security (from_env reads it)."""
        pairs = {"THEVAL_TLS_CA": self.ca, "THEVAL_TLS_CLIENT_CERT": self.cert, "THEVAL_TLS_CLIENT_KEY": self.key,
                 "THEVAL_TOKEN": self.token, "THEVAL_TLS_SERVER_NAME": self.server_name}
        return {k: v for k, v in pairs.items() if v}

    def portable(self) -> "ClientSecurity":
        """This security for a process that may run on another machine (a Ray actor of an
        external cluster, which has neither this machine's files nor its environment): the CA
        certificate itself instead of its file. A client certificate and its key stay file names,
        read where that process runs: a private key is never sent along."""
        return replace(self, ca=None, ca_pem=_read(self.ca, "CA certificate")) if self.ca else self


def own_security(cert: str | None, key: str | None, ca: str | None = None,
                 client_ca: str | None = None) -> ClientSecurity | None:
    """How a process holding a server's own TLS settings reaches that server's health check (the
    image's probe, `theval mesh up` waiting for its services): None on a plaintext server; else TLS
    trusting `ca` (--tls-ca), else `client_ca`, else the certificate itself (self-signed), and the
    server's certificate presented as client certificate, which a server requiring one accepts when
    it trusts its own CA."""
    if not cert:
        return None
    return ClientSecurity(ca or client_ca or cert, cert, key)


class _Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
              grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds the token to every call (also on plaintext loopback, where gRPC's call credentials
    refuse to go)."""

    def __init__(self, token: str):
        self.header = (HEADER, f"Bearer {token}")

    def _add(self, details):  # grpc passes a namedtuple
        return details._replace(metadata=list(details.metadata or ()) + [self.header])

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._add(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._add(details), request)

    def intercept_stream_unary(self, continuation, details, requests):
        return continuation(self._add(details), requests)

    def intercept_stream_stream(self, continuation, details, requests):
        return continuation(self._add(details), requests)


def client_channel(address: str, security: ClientSecurity | None = None, options=()) -> grpc.Channel:
    """A channel to a mesh server: TLS when security has a CA, the token on every call."""
    security = security or ClientSecurity()
    if security.tls:
        credentials = grpc.ssl_channel_credentials(
            security.ca_pem or _read(security.ca, "CA certificate"),
            _read(security.key, "client key") if security.key else None,
            _read(security.cert, "client certificate") if security.cert else None)
        if security.server_name:
            options = [*options, ("grpc.ssl_target_name_override", security.server_name)]
        channel = grpc.secure_channel(address, credentials, options=list(options))
    else:
        channel = grpc.insecure_channel(address, options=list(options))
    return grpc.intercept_channel(channel, _Bearer(security.token)) if security.token else channel
