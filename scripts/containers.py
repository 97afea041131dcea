"""The containerized mesh on this machine: `./dev containers up [--data DIR]`, `./dev containers down`.

`up` starts a Docker engine when none answers (dockerd without a bridge or iptables: every
container uses the host's network), makes the mesh's TLS material and tokens when absent, starts
docker/compose.yaml with the ports of docker/mesh.env and waits until every container is healthy.
Compose (Debian's docker-compose 1.29, or the `docker compose` plugin where installed) because an
operator reads and edits one YAML file, and the same file runs wherever Docker does.
"""
import argparse
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
PROJECT = "theval"
SERVICES = ("landmarks", "headpose", "quality", "audio", "evaluator")
CONTAINER_USER = "10001:10001"  # the images' USER


def state_dir() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "theval" / "containers"


def engine_answers() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def start_engine(log_dir: Path, timeout: float = 60) -> subprocess.Popen | None:
    """A Docker engine when none answers: dockerd without a bridge or iptables rules (containers
    use the host's network, so nothing is published beyond it). Returns the process we started
    (stop it with stop_engine), None when one was running already."""
    if engine_answers():
        return None
    if not shutil.which("dockerd"):
        raise SystemExit("error: no Docker engine answers and dockerd is missing: `apt-get install docker.io`")
    log_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(["dockerd", "--bridge=none", "--iptables=false", "--ip6tables=false"],
                            stdout=open(log_dir / "dockerd.log", "a"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    end = time.monotonic() + timeout
    while not engine_answers():
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            raise SystemExit(f"error: dockerd did not start; its log: {log_dir / 'dockerd.log'}")
        time.sleep(0.5)
    return proc


def stop_engine(proc: subprocess.Popen | None, timeout: float = 60):
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def compose_command() -> list[str]:
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise SystemExit("error: neither `docker compose` nor docker-compose is installed: "
                     "`apt-get install docker-compose`")


def settings(overrides: dict | None = None) -> dict:
    """mesh.env, then the caller's environment, then `overrides` (what compose will substitute)."""
    values = {}
    for line in (DOCKER / "mesh.env").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    values.update({k: os.environ[k] for k in values if k in os.environ})
    values.update(overrides or {})
    return values


def _owned(path: Path, mode: int, user: str):
    path.chmod(mode)
    if os.geteuid() == 0:
        uid, gid = (int(x) for x in user.split(":"))
        os.chown(path, uid, gid)


def make_secrets(folder: Path, user: str = CONTAINER_USER, dns_names=()) -> Path:
    """A CA, one certificate for 127.0.0.1, localhost and `dns_names` (server and client use: the
    evaluator presents it to the services), a tokens file with one identity, and that identity's
    token for the host's clients (`token`). Kept when present; made with openssl."""
    if (folder / "tokens").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)

    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "365",
            "-subj", "/CN=theval-mesh-ca", "-keyout", "ca.key", "-out", "ca.crt")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=theval-mesh",
            "-keyout", "server.key", "-out", "server.csr")
    names = ",".join(f"DNS:{n}" for n in ("localhost", *dns_names))
    (folder / "server.ext").write_text(f"basicConstraints=critical,CA:FALSE\nsubjectAltName={names},IP:127.0.0.1\n"
                                       "extendedKeyUsage=serverAuth,clientAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "365",
            "-extfile", "server.ext", "-out", "server.crt")
    token = secrets.token_urlsafe(32)
    (folder / "token").write_text(token + "\n")
    (folder / "tokens").write_text(f"# identity token (THEVAL_TOKENS_FILE of the evaluator)\noperator {token}\n")
    for name in ("server.csr", "server.ext", "ca.srl"):
        (folder / name).unlink(missing_ok=True)
    (folder / "token").chmod(0o600)  # the host's, not the containers'
    (folder / "ca.key").chmod(0o600)
    for name, mode in (("ca.crt", 0o644), ("server.crt", 0o644), ("server.key", 0o600), ("tokens", 0o600)):
        _owned(folder / name, mode, user)
    return folder


def environment(data: Path, state: Path, overrides: dict | None = None) -> dict:
    """What compose needs: mesh.env's settings, the image tag, the mounted folders, the user."""
    root = os.geteuid() == 0
    user = CONTAINER_USER if root else f"{os.getuid()}:{os.getgid()}"
    secrets_dir = make_secrets(state / "secrets", user)
    weights = Path(os.environ.get("THEVAL_WEIGHTS") or Path.home() / ".cache" / "theval" / "weights")
    weights.mkdir(parents=True, exist_ok=True)
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    store = state / "store"
    store.mkdir(parents=True, exist_ok=True)
    _owned(store, 0o700, user)
    values = settings({"THEVAL_VERSION": version, "THEVAL_SECRETS": str(secrets_dir), "THEVAL_DATA": str(data),
                       "THEVAL_WEIGHTS_DIR": str(weights), "THEVAL_STORE_DIR": str(store), "THEVAL_USER": user,
                       **(overrides or {})})
    return {**os.environ, **values}


def compose(env: dict, *args, check=True, capture=False):
    cmd = compose_command() + ["-p", PROJECT, "-f", str(DOCKER / "compose.yaml"), *args]
    return subprocess.run(cmd, env=env, check=check, capture_output=capture, text=True)


def container_of(service: str) -> str:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}",
                          "--filter", f"label=com.docker.compose.service={service}"],
                         capture_output=True, text=True, check=True).stdout.split()
    if not out:
        raise RuntimeError(f"no container of the {service} service")
    return out[0]


def inspect(container: str, template: str) -> str:
    return subprocess.run(["docker", "inspect", "-f", template, container], capture_output=True, text=True,
                          check=True).stdout.strip()


def wait_healthy(services=SERVICES, timeout: float = 600) -> dict:
    """Wait until Docker reports every container healthy; {service: seconds since its start}."""
    end, healthy = time.monotonic() + timeout, {}
    while len(healthy) < len(services):
        for s in services:
            if s in healthy:
                continue
            c = container_of(s)
            status = inspect(c, "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}")
            if status == "running healthy":
                healthy[s] = time.monotonic()
            elif status.startswith(("exited", "dead", "restarting")) or inspect(c, "{{.RestartCount}}") != "0":
                logs = subprocess.run(["docker", "logs", "--tail", "30", c], capture_output=True, text=True)
                raise RuntimeError(f"the {s} container stopped ({status}):\n{logs.stdout}{logs.stderr}")
        if time.monotonic() > end:
            raise RuntimeError(f"not healthy after {timeout:.0f} s: {sorted(set(services) - set(healthy))}")
        time.sleep(0.5)
    return healthy


def up(data: Path, state: Path | None = None, overrides: dict | None = None, timeout: float = 600) -> dict:
    """Start the mesh and wait for it; returns compose's environment (ports, secrets folder)."""
    state = state or state_dir()
    env = environment(data.resolve(), state, overrides)
    compose(env, "up", "-d", "--no-build")
    wait_healthy(timeout=timeout)
    return env


def down(env: dict | None = None):
    """Stop and remove the mesh's containers (the store, secrets and data stay on the host)."""
    compose(env or {**os.environ, **settings(_placeholders())}, "down", "--timeout", "40")


def _placeholders() -> dict:
    """`down` needs every variable the file uses defined, whatever their values."""
    return {k: "unused" for k in ("THEVAL_VERSION", "THEVAL_SECRETS", "THEVAL_DATA", "THEVAL_WEIGHTS_DIR",
                                      "THEVAL_STORE_DIR")} | \
        {"THEVAL_USER": CONTAINER_USER}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="./dev containers", description=__doc__.split("\n\n")[0])
    actions = p.add_subparsers(dest="action", required=True)
    u = actions.add_parser("up", help="start the containerized mesh (build the images first: ./dev images)")
    u.add_argument("--data", default=".", help="the folder of videos the mesh may read (default: here)")
    actions.add_parser("down", help="stop and remove the mesh's containers")
    args = p.parse_args(argv)
    state = state_dir()
    if args.action == "down":
        down()
        return 0
    engine = start_engine(state)
    if engine is not None:
        print(f"==> started a Docker engine (pid {engine.pid}; log {state / 'dockerd.log'})")
    env = up(Path(args.data), state)
    s = Path(env["THEVAL_SECRETS"])
    print("The mesh is up (TLS and tokens on):")
    for service in SERVICES:
        print(f"  {service:<10} {env['THEVAL_HOST']}:{env[service.upper() + '_PORT']:<6} "
              f"metrics http://{env['THEVAL_HOST']}:{env[service.upper() + '_METRICS_PORT']}/metrics")
    print(f"Evaluate through it:\n  THEVAL_TLS_CA={s / 'ca.crt'} THEVAL_TOKEN_FILE={s / 'token'} \\\n"
          f"    theval evaluate --mesh {env['THEVAL_HOST']}:{env['EVALUATOR_PORT']} --gt GT_DIR --model NAME=DIR "
          f"--out results/")
    targets = " ".join(f"--target {s}={env['THEVAL_HOST']}:{env[s.upper() + '_METRICS_PORT']}" for s in SERVICES)
    print(f"Prometheus configuration for it:\n  .venv/bin/theval mesh prometheus-config {targets} "
          f"--rules {ROOT / 'monitoring' / 'rules.yml'} > prometheus.yml\nStop it: ./dev containers down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
