"""An external Ray cluster for the tests, as KubeRay runs one: `ray start --head --block`, kept on
loopback (Ray turns a loopback node IP into the machine's address unless multi-node clusters are
off: jobs.pipeline._private_ray), behind Ray's token, from its own short temp folder (Ray's socket
paths hold 107 bytes). Stopped by signalling its own process group: never `ray stop`, which stops
every Ray on the machine."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from theval_mesh.rpc.launcher import free_port


class RayHead:
    def __init__(self, log: Path, env: dict, token: str, *args: str, port: int | None = None):
        """env: the environment of the head and so of every Ray worker process it starts (Ray's
        settings added); token: Ray's; args: more `ray start` flags (--num-cpus, ...); port: the
        GCS's (default: a free one)."""
        self.port, self.log = port or free_port(), log
        self.temp = tempfile.mkdtemp(prefix="theval-ray-")
        # What a driver on this machine needs too: the token, and loopback kept as the node's IP.
        self.driver_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        # GRPC_ENABLE_FORK_SUPPORT: as k8s/base/raycluster.yaml sets it on the head (its Ray Client
        # server's forks; there, why).
        self.env = {**env, **self.driver_env, "RAY_USAGE_STATS_ENABLED": "0", "GRPC_ENABLE_FORK_SUPPORT": "false",
                    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', os.defpath)}"}
        self.proc = subprocess.Popen(
            ["ray", "start", "--head", "--block", f"--port={self.port}", "--node-ip-address=127.0.0.1",
             f"--temp-dir={self.temp}", "--include-dashboard=false", "--disable-usage-stats", *args],
            env=self.env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        self.address = f"127.0.0.1:{self.port}"

    def wait_listening(self, port: int | None = None, timeout: float = 120) -> "RayHead":
        """Until `port` (default the GCS's) accepts connections: ray.init before that fails, and
        Ray keeps the failure."""
        end = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, f"ray start exited: {self.log.read_text()[-3000:]}"
            try:
                socket.create_connection(("127.0.0.1", port or self.port), timeout=1).close()
                return self
            except OSError:
                assert time.monotonic() < end, f"the Ray head did not listen: {self.log.read_text()[-3000:]}"
                time.sleep(0.5)

    def session_logs(self, pattern: str = "ray_client_server*.err", tail: int = 4000) -> str:
        """The end of each of the head's session logs that match `pattern`, for a failing test's
        output (they live in the head's temp folder, which stop() removes)."""
        logs = sorted(Path(self.temp).glob(f"session_latest/logs/{pattern}"))
        return "".join(f"==> {p.name} <==\n{p.read_text(errors='replace')[-tail:]}\n" for p in logs)

    def stop(self, grace_s: float = 10):
        """SIGTERM to its process group, SIGKILL to what is left after grace_s (Ray's processes
        can take half a minute to go on their own)."""
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(grace_s)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        shutil.rmtree(self.temp, ignore_errors=True)
