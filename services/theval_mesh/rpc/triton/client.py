"""Clients of the Triton models (tritonclient.grpc): TritonModels stands in for
backends.quality.local_models.LocalModels, TritonVad for backends.audio.backend.LocalVad,
TritonFaceXFormer for backends.headpose.facexformer.LocalNetwork. Errors become
ServiceError with the gRPC code the calling service answers with (UNAVAILABLE while Triton or a
model is down, so the evaluator retries)."""
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from theval_mesh.backends.liveness import check
from theval_mesh.pure.errors import ServiceError
from theval_mesh.rpc.server import channel_options
from theval_mesh.rpc.triton.repository import FACEXFORMER_MODEL, MODELS, REQUEST_IMAGES, TRITON_NAME, VAD_MODEL

MAX_MESSAGE = 2 ** 31 - 1
HEALTH_TIMEOUT_S = 2.0
_UNAVAILABLE = {"StatusCode.UNAVAILABLE", "StatusCode.NOT_FOUND", "StatusCode.CANCELLED"}


class TritonClient:
    """One gRPC connection to a Triton server, shared by every model client in a process."""

    def __init__(self, url: str, security=None, timeout_s: float = 600.0):
        """security (rpc.security.ClientSecurity): with a CA, mutual TLS (Triton beyond loopback)."""
        import tritonclient.grpc as tg
        self.tg, self.url, self.timeout_s = tg, url, timeout_s
        tls = {}
        if security is not None and security.ca:
            tls = dict(ssl=True, root_certificates=security.ca, private_key=security.key,
                       certificate_chain=security.cert)
        # Reconnect within a second of Triton coming back, as between the mesh's services.
        self.client = tg.InferenceServerClient(url, channel_args=channel_options(MAX_MESSAGE), **tls)
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="triton")

    def _error(self, model: str, err) -> ServiceError:
        status = str(err.status() or "")
        text = err.message() if hasattr(err, "message") else str(err)
        if status in _UNAVAILABLE or not status or "failed to connect" in text.lower():
            return ServiceError("UNAVAILABLE", f"Triton at {self.url} cannot serve {model}: {text}")
        if status == "StatusCode.PERMISSION_DENIED":  # its front does not admit this service's certificate
            return ServiceError("INTERNAL", f"Triton at {self.url} refused this service: {text}")
        if status == "StatusCode.DEADLINE_EXCEEDED":
            return ServiceError("DEADLINE_EXCEEDED", f"Triton at {self.url} did not answer for {model} in time")
        return ServiceError("INTERNAL", f"Triton model {model} at {self.url} failed: {text}")

    def infer(self, model: str, name: str, array: np.ndarray, outputs: tuple[str, ...]) -> dict:
        """{output: array} of one request with one input."""
        tg = self.tg
        given = tg.InferInput(name, list(array.shape), "UINT8" if array.dtype == np.uint8 else "FP32")
        given.set_data_from_numpy(array)
        try:
            result = self.client.infer(model, [given], outputs=[tg.InferRequestedOutput(o) for o in outputs],
                                       client_timeout=self.timeout_s)
        except tg.InferenceServerException as err:
            raise self._error(model, err) from None
        return {o: result.as_numpy(o) for o in outputs}

    def provenance(self, model: str, name: str, dummy: np.ndarray) -> dict:
        """The model's PROVENANCE (what it loaded), asked alone: the network does not run."""
        text = self.infer(model, name, dummy, ("PROVENANCE",))["PROVENANCE"].reshape(-1)[0]
        return json.loads(text.decode() if isinstance(text, bytes) else text)

    def states(self) -> dict[str, tuple[str, str]]:
        """{model: (state, reason)} from Triton's repository index."""
        try:
            index = self.client.get_model_repository_index(as_json=True, client_timeout=HEALTH_TIMEOUT_S)
        except self.tg.InferenceServerException as err:
            raise self._error("its models", err) from None
        # A model of the repository that Triton was not asked to load has no state.
        return {m["name"]: (m.get("state", "NOT_LOADED"), m.get("reason", "")) for m in index.get("models", [])}

    def ready(self, models) -> tuple[bool, str]:
        """(every model READY, why not): the health of a service that calls these models."""
        try:
            states = self.states()
        except ServiceError as err:
            return False, str(err)
        down = [f"{m} {states.get(m, ('not in its repository', ''))[0]}" for m in models
                if states.get(m, ("",))[0] != "READY"]
        return not down, (f"Triton at {self.url}: " + ", ".join(down)) if down else ""

    def statistics(self, model: str) -> dict:
        """Triton's own counters for a model: inference_count, execution_count, ..."""
        stats = self.client.get_inference_statistics(model, as_json=True)["model_stats"]
        return {k: int(v) for k, v in stats[0].items() if k.endswith("_count")} if stats else {}

    def close(self):
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class TritonModels:
    """The quality models on Triton, with LocalModels' interface (backends.quality.backend uses either).

    A call's images go in requests of REQUEST_IMAGES, sent at once, so that Triton's dynamic
    batcher can join them (and other videos' requests of the same size) into one execution."""

    def __init__(self, client: TritonClient):
        self.client = client
        self.served_by = f"triton {client.url}"
        self._described: dict = {}
        self._lock = threading.Lock()

    def unavailable(self, names) -> str | None:
        """Why Triton cannot run some of these models (None: it can). Raises ServiceError
        (UNAVAILABLE) while Triton does not answer or a model is still loading: a caller that
        resolves `auto` waits rather than falling back to the proxy for a transient reason."""
        states = self.client.states()
        problems = []
        for name in names:
            model = TRITON_NAME[name]
            state, reason = states.get(model, ("MISSING", "not in Triton's model repository"))
            if state == "LOADING":
                raise ServiceError("UNAVAILABLE", f"Triton at {self.client.url} is still loading {model}")
            if state != "READY":
                problems.append(f"{model} is {state} ({reason.strip() or 'see the Triton log'})")
        return (f"Triton at {self.client.url} cannot serve the quality models: {'; '.join(problems)}"
                if problems else None)

    def load(self, name: str):
        self.describe(name)

    def scores(self, name: str, images: list[np.ndarray], each: bool = False) -> np.ndarray:
        """`each` is the Triton model's own setting (score_each in its config), as in-process."""
        model = TRITON_NAME[name]
        assert each == MODELS[model].each, f"{model}: score_each differs from the caller's"
        if not images:
            return np.zeros(0)
        groups = [images[i:i + REQUEST_IMAGES] for i in range(0, len(images), REQUEST_IMAGES)]

        def run(group):
            if len({im.shape for im in group}) > 1:  # mixed sizes cannot share a request
                return np.concatenate([run([im]) for im in group])
            return self.client.infer(model, "IMAGES", np.stack(group), ("SCORES",))["SCORES"].reshape(-1)
        parts = list(self.client.pool.map(run, groups))
        return np.concatenate(parts).astype(np.float64)

    def describe(self, name: str) -> dict:
        """{"pyiqa": version, "files": {file name: sha256}, ...} as the Triton model loaded them."""
        with self._lock:
            if name not in self._described:
                self._described[name] = self.client.provenance(
                    TRITON_NAME[name], "IMAGES", np.zeros((1, 1, 1, 3), np.uint8))
            return self._described[name]

    def inference(self, names) -> dict:
        """How Triton's models run (LocalModels.inference, as each Triton model reported it)."""
        described = [self.describe(n).get("inference") or {} for n in names]
        first = described[0] if described else {}
        runtimes = {k: v for d in described for k, v in (d.get("runtimes") or {}).items()}
        return {"device": first.get("device", "not recorded"), "precision": first.get("precision", "fp32"),
                "runtimes": runtimes}

    def forget(self):
        """Triton went away: what comes back may have loaded other weights."""
        with self._lock:
            self._described.clear()


class TritonVad:
    """Silero VAD on Triton, with LocalVad's interface (backends.audio.backend uses either)."""

    def __init__(self, client: TritonClient):
        self.client = client
        self.served_by = f"triton {client.url}"

    def probabilities(self, waves: list[np.ndarray], cancelled=None) -> list[np.ndarray]:
        """One request per wave, sent at once: Triton batches them (and other calls')."""
        check(cancelled)
        def run(wave):
            batch = np.ascontiguousarray(wave, np.float32).reshape(1, -1)
            return self.client.infer(VAD_MODEL, "AUDIO", batch, ("PROBS",))["PROBS"].reshape(-1)
        return list(self.client.pool.map(run, waves))

    def provenance(self) -> str:
        return self.client.provenance(VAD_MODEL, "AUDIO", np.zeros((1, 512), np.float32))["vad"]


class TritonFaceXFormer:
    """FaceXFormer on Triton, with LocalNetwork's interface (backends.headpose.facexformer uses
    either). A batch goes as ONE request, as in-process: the network sees the reference's batches."""

    def __init__(self, client: TritonClient):
        self.client = client
        self.served_by = f"triton {client.url}"
        self._files = None

    def unavailable(self) -> str | None:
        """Why Triton cannot run FaceXFormer (None: it can). ServiceError (UNAVAILABLE) while
        Triton does not answer or is still loading it: worth waiting for, unlike a failed load."""
        state, reason = self.client.states().get(FACEXFORMER_MODEL, ("MISSING", "not in Triton's model repository"))
        if state == "LOADING":
            raise ServiceError("UNAVAILABLE", f"Triton at {self.client.url} is still loading {FACEXFORMER_MODEL}")
        if state != "READY":
            return (f"Triton at {self.client.url} cannot serve {FACEXFORMER_MODEL}: {state} "
                    f"({reason.strip() or 'see the Triton log'})")
        return None

    @property
    def files(self) -> dict:
        """{file name: (sha256, stand-in seed or None)} as the Triton model loaded them (asked once)."""
        if self._files is None:
            described = self.client.provenance(FACEXFORMER_MODEL, "CROPS", np.zeros((1, 3, 224, 224), np.float32))
            self._files = {name: tuple(entry) for name, entry in described["files"].items()}
        return self._files

    def degrees(self, batch: np.ndarray) -> np.ndarray:
        """(N, 3) float32 pitch, yaw, roll in degrees of a normalised (N, 3, 224, 224) batch."""
        batch = np.ascontiguousarray(batch, np.float32)
        return self.client.infer(FACEXFORMER_MODEL, "CROPS", batch, ("DEGREES",))["DEGREES"].reshape(-1, 3)
