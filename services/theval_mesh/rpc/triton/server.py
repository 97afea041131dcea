"""Start a real Triton server on this machine: the `tritonserver` 2.51 binary bundled in the
nvidia-pytriton wheel, with its python backend, serving the project's model repository.

What the wheel needs to run outside pytriton (docs/deployment.md, "Triton"; checked here):
  - a backend directory whose python/ holds the backend library, its utils and the python stub
    built for THIS Python (we link them into a temporary directory);
  - the wheel's bundled libraries, and this interpreter's libpython, on LD_LIBRARY_PATH;
  - this environment's bin/ first on PATH: the stub embeds Python and finds its prefix through
    the `python3` on PATH, so it sees this virtual environment's packages (theval_mesh, torch,
    pyiqa) and not whatever the base interpreter has installed.
On a GPU cluster the same repository runs in NVIDIA's Triton image instead (k8s/).
"""
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from theval_mesh.pure.errors import UserError
from theval_mesh.pure.services import TRITON_CALLERS
from theval_mesh.rpc.launcher import ChildProcess, free_port
from theval_mesh.rpc.security import is_loopback

SHM_DEFAULT_BYTES = 16 << 20  # the python backend's shared memory per model instance
SHM_GROWTH_BYTES = 16 << 20


def bundled_root() -> Path:
    """The wheel's tritonserver folder (bin/, backends/, python_backend_stubs/)."""
    try:
        import pytriton
    except ImportError:
        raise UserError("the Triton server comes from the nvidia-pytriton wheel, which is not installed: "
                        "run ./dev setup (or pip install nvidia-pytriton)") from None
    root = Path(pytriton.__file__).parent / "tritonserver"
    if not (root / "bin" / "tritonserver").is_file():
        raise UserError(f"no tritonserver binary in {root}: reinstall nvidia-pytriton")
    return root


def _stub(root: Path) -> Path:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = root / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.is_file():
        raise UserError(f"nvidia-pytriton has no python backend stub for Python {version} ({stub})")
    return stub


def make_backend_dir(root: Path, where: Path) -> Path:
    """<where>/python: the python backend with the stub for this Python."""
    python = where / "python"
    python.mkdir(parents=True, exist_ok=True)
    for src in (root / "backends" / "python" / "libtriton_python.so",
                root / "backends" / "python" / "triton_python_backend_utils.py", _stub(root)):
        os.symlink(src, python / src.name)
    return where


def environment(root: Path, weights_store=None, base=None) -> dict:
    env = dict(os.environ if base is None else base)
    libs = [str(root.parent.parent / "nvidia_pytriton.libs")]
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    if not (libdir and soname and Path(libdir, soname).is_file()):
        raise UserError(f"Triton's python backend embeds this Python, whose shared library ({soname} in {libdir}) "
                        "is missing: use a Python built with --enable-shared (Debian's python3.11, pyenv with "
                        "PYTHON_CONFIGURE_OPTS=--enable-shared)")
    libs.append(libdir)  # this interpreter's libpython, not a system one of another patch level
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libs + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("PYTHONHOME", None)
    if weights_store:
        env["THEVAL_WEIGHTS"] = str(Path(weights_store).expanduser().resolve())
    return env


class TritonServer(ChildProcess):
    """One tritonserver process. Ports given as 0 are chosen free at the first start and kept
    across restarts, so clients find a restarted server at the same address."""
    service = "triton"

    def __init__(self, repository, host: str = "127.0.0.1", grpc_port: int = 0, http_port: int = 0,
                 metrics_port: int = 0, models=None, weights_store=None, config_name: str | None = None,
                 log=None, tls: tuple[str, str, str] | None = None, allowed_callers=TRITON_CALLERS):
        self.repository = Path(repository).resolve()
        self.host = host
        # (cert, key, client CA): gRPC with mutual TLS, served by the front (rpc.triton.front), which
        # admits the certificate names allowed_callers and forwards to tritonserver's own gRPC on a
        # loopback port. Beyond loopback TLS is required, and the HTTP endpoint (inference too, no
        # TLS in Triton) stays on loopback for the health probes.
        self.tls, self.allowed_callers = tls, tuple(allowed_callers)
        if not is_loopback(host) and not (tls and all(tls)):
            raise UserError(f"Triton on {host} listens beyond loopback: that needs mutual TLS on its gRPC "
                            "endpoint (--tls-cert, --tls-key, --tls-client-ca); or listen on 127.0.0.1")
        self.http_host = host if is_loopback(host) else "127.0.0.1"
        self.ports = {"grpc": grpc_port, "http": http_port, "metrics": metrics_port}
        if tls:
            self.ports["backend_grpc"] = 0  # tritonserver's own gRPC, behind the front
        self.front = None
        self.models, self.weights_store, self.config_name = models, weights_store, config_name
        self.log = log  # a file for the server's output (None: inherit)
        self.root = bundled_root()
        self._workdir: str | None = None

    # ------------------------------------------------------------------ addresses
    @property
    def address(self) -> str:
        return f"{self.host}:{self.ports['grpc']}"

    @property
    def http_url(self) -> str:
        return f"http://{self.http_host}:{self.ports['http']}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.ports['metrics']}/metrics"

    # ------------------------------------------------------------------ lifecycle
    def command(self, backends: Path) -> list[str]:
        grpc_host, grpc_port = ("127.0.0.1", self.ports["backend_grpc"]) if self.tls else (self.host, self.ports["grpc"])
        cmd = [str(self.root / "bin" / "tritonserver"),
               f"--model-repository={self.repository}", f"--backend-directory={backends}",
               f"--grpc-address={grpc_host}", f"--grpc-port={grpc_port}",
               f"--http-address={self.http_host}", f"--http-port={self.ports['http']}",
               f"--metrics-address={self.host}", f"--metrics-port={self.ports['metrics']}",
               # A model that cannot load (missing weights) is UNAVAILABLE; the others serve.
               "--exit-on-error=false", "--strict-readiness=false",
               f"--backend-config=python,shm-default-byte-size={SHM_DEFAULT_BYTES}",
               f"--backend-config=python,shm-growth-byte-size={SHM_GROWTH_BYTES}",
               "--allow-cpu-metrics=true", "--log-verbose=0"]
        if self.config_name:
            cmd.append(f"--model-config-name={self.config_name}")
        if self.models:
            cmd.append("--model-control-mode=explicit")
            cmd += [f"--load-model={m}" for m in self.models]
        return cmd

    def spawn(self) -> "TritonServer":
        for name, port in self.ports.items():
            if not port:
                self.ports[name] = free_port("127.0.0.1" if name == "backend_grpc" else self.host)
        if self.tls and self.front is None:  # kept across restarts: its callers keep their address
            from theval_mesh.rpc.triton.front import TritonFront
            self.front = TritonFront(self.address, self.tls, self.allowed_callers,
                                     f"127.0.0.1:{self.ports['backend_grpc']}")
        if self._workdir is None:
            self._workdir = tempfile.mkdtemp(prefix="theval-triton-")
            make_backend_dir(self.root, Path(self._workdir) / "backends")
        out = self.log if self.log is not None else None
        self.proc = subprocess.Popen(self.command(Path(self._workdir) / "backends"),
                                     env=environment(self.root, self.weights_store), stdout=out,
                                     stderr=subprocess.STDOUT if out is not None else None,
                                     start_new_session=True)
        return self

    def live(self, timeout: float = 1.0) -> bool:
        try:
            with urllib.request.urlopen(f"{self.http_url}/v2/health/live", timeout=timeout) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_live(self, timeout: float = 300) -> "TritonServer":
        """Triton answers once it has tried to load every model (it opens its endpoints after)."""
        end = time.monotonic() + timeout
        while not self.live():
            if self.proc.poll() is not None:
                raise RuntimeError(f"tritonserver exited with code {self.proc.returncode} before serving "
                                   f"(command: {' '.join(self.command(Path('<backends>')))})")
            if time.monotonic() > end:
                raise RuntimeError(f"tritonserver did not answer on {self.http_url} within {timeout:.0f} s")
            time.sleep(0.2)
        return self

    def start(self, timeout: float = 300) -> "TritonServer":
        """spawn() and wait_live(); a server that does not come up is stopped, not left running."""
        try:
            self.spawn()
            return self.wait_live(timeout)
        except BaseException:
            self.close()
            raise

    def wait_for(self, status: str = "SERVING", timeout: float = 300) -> "TritonServer":
        """For the mesh launcher, which waits for every process this way."""
        return self.wait_live(timeout)

    def terminate(self, timeout: float = 60) -> int | None:
        """SIGTERM, SIGKILL after `timeout`; then stop the front and remove the backend directory
        (a stop by the mesh launcher, which calls this, leaves nothing behind)."""
        code = super().terminate(timeout)
        if self.front is not None:
            self.front.close()
            self.front = None
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        return code

    def close(self):
        self.terminate()
