"""A real Prometheus server (Debian's `prometheus`) for the tests: started on a free loopback port
with a configuration from theval_mesh.rpc.scrape_config and the project's rules, queried through
its HTTP API, stopped at the end."""
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from tests.support.mesh_support import free_port
from theval_mesh.rpc.scrape_config import prometheus_config_text

RULES = Path(__file__).resolve().parents[2] / "monitoring" / "rules.yml"


class Prometheus:
    def __init__(self, folder: Path, targets: dict, interval_s: float = 1.0):
        binary = shutil.which("prometheus")
        assert binary, "Debian's prometheus package is missing: ./dev test installs it"
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "prometheus.yml"
        config.write_text(prometheus_config_text(targets, interval_s, [RULES]))
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = folder / "prometheus.log"
        self.proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
                                      f"--web.listen-address={self.url.removeprefix('http://')}"],
                                     stdout=open(self.log, "w"), stderr=subprocess.STDOUT)

    def api(self, path: str, **params):
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as answer:
            body = json.loads(answer.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list:
        return self.api("query", query=expr)["result"]

    def wait(self, condition, what: str, timeout: float = 60):
        end = time.monotonic() + timeout
        while True:
            try:
                if condition():
                    return
            except OSError:
                pass  # not listening yet
            assert self.proc.poll() is None, self.log.read_text()[-2000:]
            assert time.monotonic() < end, f"Prometheus: {what} after {timeout:.0f} s"
            time.sleep(0.5)

    def wait_all_up(self, n: int, timeout: float = 60):
        def up():
            targets = self.api("targets")["activeTargets"]
            return len(targets) == n and all(t["health"] == "up" for t in targets)
        self.wait(up, f"not {n} targets up", timeout)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
