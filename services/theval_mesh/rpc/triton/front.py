"""Triton's front: the gRPC endpoint the mesh's services reach Triton by, beyond loopback.

Triton's own mutual TLS admits any certificate its CA signed, and it cannot check a caller's name.
The front serves Triton's gRPC API with mutual TLS and admits only the certificate names it is
given (the services whose models run on Triton: pure.services.TRITON_CALLERS), then forwards each
call, as bytes, to the Triton behind it on loopback. It forwards what a service needs: health,
metadata, the repository index, statistics and inference. Loading and unloading models, shared
memory, trace and log settings are not served (UNIMPLEMENTED)."""
import logging
from concurrent import futures

import grpc

from theval_mesh.rpc.security import CallerInterceptor, server_credentials

log = logging.getLogger("theval.triton")
SERVICE = "inference.GRPCInferenceService"
UNARY = ("ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer",
         "ModelConfig", "ModelStatistics", "RepositoryIndex")
STREAMING = ("ModelStreamInfer",)
MAX_MESSAGE = 2 ** 31 - 1  # what Triton itself accepts
WORKERS = 32


def _forwarded(error: grpc.RpcError, context):
    context.abort(error.code(), error.details() or "")


class _Forward(grpc.GenericRpcHandler):
    """Every method of UNARY and STREAMING, as bytes, to the channel's server; the caller's
    deadline and cancellation go along."""

    def __init__(self, channel: grpc.Channel):
        self.channel = channel
        self.handlers = {f"/{SERVICE}/{m}": grpc.unary_unary_rpc_method_handler(self._unary(m)) for m in UNARY}
        self.handlers.update({f"/{SERVICE}/{m}": grpc.stream_stream_rpc_method_handler(self._stream(m))
                              for m in STREAMING})

    def service(self, details):
        return self.handlers.get(details.method)

    def _unary(self, method: str):
        call = self.channel.unary_unary(f"/{SERVICE}/{method}")

        def forward(request: bytes, context):
            future = call.future(request, timeout=context.time_remaining())
            context.add_callback(future.cancel)
            try:
                return future.result()
            except grpc.RpcError as err:
                _forwarded(err, context)
        return forward

    def _stream(self, method: str):
        call = self.channel.stream_stream(f"/{SERVICE}/{method}")

        def forward(requests, context):
            responses = call(requests, timeout=context.time_remaining())
            context.add_callback(responses.cancel)
            try:
                yield from responses
            except grpc.RpcError as err:
                _forwarded(err, context)
        return forward


class TritonFront:
    """A gRPC server on `address` with mutual TLS (tls: cert, key, client CA) that admits the
    certificate names `allowed` and forwards to the plaintext Triton at `backend` (loopback)."""

    def __init__(self, address: str, tls: tuple[str, str, str], allowed, backend: str):
        self.channel = grpc.insecure_channel(backend, options=[("grpc.max_send_message_length", MAX_MESSAGE),
                                                               ("grpc.max_receive_message_length", MAX_MESSAGE)])
        self.server = grpc.server(futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="triton-front"),
                                  handlers=[_Forward(self.channel)],
                                  interceptors=[CallerInterceptor("triton", frozenset(allowed))],
                                  options=[("grpc.max_send_message_length", MAX_MESSAGE),
                                           ("grpc.max_receive_message_length", MAX_MESSAGE),
                                           ("grpc.so_reuseport", 0)])
        if not self.server.add_secure_port(address, server_credentials(*tls)):
            raise RuntimeError(f"Triton's front cannot listen on {address} (port in use?)")
        self.server.start()
        log.info("triton: front on %s admits %s, forwarding to %s", address, ", ".join(sorted(allowed)), backend)

    def close(self):
        self.server.stop(0)
        self.channel.close()
