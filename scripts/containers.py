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
import tempfile
import time
from pathlib import Path

from theval_mesh.pure.services import SERVICES

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
PROJECT = "theval"
LABEL = "com.docker.compose"  # compose labels what it makes with its project and service
CONTAINER_USER = "10001:10001"  # the images' USER
DAYS = 365  # the certificates' validity
# What make_secrets kept in the secrets folder before each identity had its own key (the CA's key among them).
LEGACY_FILES = ("ca.key", "server.crt", "server.key", "tokens")


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


def mesh_env() -> dict:
    """docker/mesh.env's settings, as the file has them."""
    values = {}
    for line in (DOCKER / "mesh.env").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def settings(overrides: dict | None = None) -> dict:
    """mesh.env, then the caller's environment, then `overrides` (what compose will substitute)."""
    values = mesh_env()
    values.update({k: os.environ[k] for k in values if k in os.environ})
    values.update(overrides or {})
    return values


def _owned(path: Path, mode: int, user: str | None):
    path.chmod(mode)
    if user and os.geteuid() == 0:
        uid, gid = (int(x) for x in user.split(":"))
        os.chown(path, uid, gid)


def _identity_files(identity: str) -> tuple:
    return tuple(f"{identity}/{name}" for name in ("tls.crt", "tls.key", "ca.crt")) + \
        ((f"{identity}/tokens",) if identity == "evaluator" else ())


def make_secrets(folder: Path, identities: dict | None = None, user: str | None = CONTAINER_USER) -> Path:
    """The mesh's TLS material and tokens in `folder`, one sub-folder per identity, each mounted
    alone by that identity's container (or Kubernetes Secret):

        IDENTITY/tls.crt, tls.key  its own key, and a certificate for 127.0.0.1, localhost and its
                                   names (identities: {identity: DNS names}; default: each service's
                                   own name, which is how the evaluator reaches it in docker/compose.yaml)
        IDENTITY/ca.crt            the CA's certificate
        evaluator/tokens           the API's tokens, one identity (`operator`): only the evaluator reads it
        ca.crt, token              for the host's clients: the CA's certificate and operator's token

    Each certificate is for server and client use: every server's own health probe presents it
    to a server that requires client certificates, and the evaluator (like quality and audio to
    Triton) presents it when it calls. The CA's key lives in a temporary folder while the
    certificates are signed, and is then gone: the material is made whole or not at all (kept when
    complete; remade, with a new CA, when anything is missing). Made with openssl; keys and tokens
    0600, owned by `user` (the containers' user; None: the caller)."""
    identities = identities or {s: (s,) for s in SERVICES}
    wanted = ("ca.crt", "token") + tuple(f for i in identities for f in _identity_files(i))
    if all((folder / f).is_file() for f in wanted):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    for stale in LEGACY_FILES:  # an earlier layout's shared key and the CA's key beside it
        (folder / stale).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="theval-ca-") as work:
        def openssl(*args):
            subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=work)

        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days",
                str(DAYS), "-subj", "/CN=theval-mesh-ca", "-keyout", "ca.key", "-out", "ca.crt")
        shutil.copy(Path(work) / "ca.crt", folder / "ca.crt")
        for identity, dns in identities.items():
            own = folder / identity
            own.mkdir(exist_ok=True)
            openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj",
                    f"/CN={identity}", "-keyout", str(own / "tls.key"), "-out", "tls.csr")
            names = ",".join(f"DNS:{n}" for n in dict.fromkeys(("localhost", *dns)))
            (Path(work) / "tls.ext").write_text(
                f"basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                f"extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName={names},IP:127.0.0.1\n")
            openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days",
                    str(DAYS), "-extfile", "tls.ext", "-out", str(own / "tls.crt"))
            shutil.copy(folder / "ca.crt", own / "ca.crt")
    token = secrets.token_urlsafe(32)
    (folder / "token").write_text(token + "\n")
    (folder / "token").chmod(0o600)  # the host's, not the containers'
    (folder / "ca.crt").chmod(0o644)
    if "evaluator" in identities:
        (folder / "evaluator" / "tokens").write_text(
            f"# identity token (THEVAL_TOKENS_FILE of the evaluator)\noperator {token}\n")
    for identity in identities:
        _owned(folder / identity, 0o700, user)
        for name in _identity_files(identity):
            _owned(folder / name, 0o600 if name.endswith((".key", "tokens")) else 0o644, user)
    return folder


def environment(data: Path, state: Path, overrides: dict | None = None) -> dict:
    """What compose needs: mesh.env's settings, the image tag, the mounted folders, the user."""
    root = os.geteuid() == 0
    user = CONTAINER_USER if root else f"{os.getuid()}:{os.getgid()}"
    secrets_dir = make_secrets(state / "secrets", user=user)
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
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={LABEL}.project={PROJECT}",
                          "--filter", f"label={LABEL}.service={service}"],
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


def down(timeout: int = 40) -> list[str]:
    """Stop and remove every container of the compose project, the evaluator first (its calls
    finish), and the project's networks; returns the services stopped. This is `docker compose -p
    theval down`, done through the labels compose puts on what it makes: it needs no compose file,
    variable or state folder, so it stops whatever an `up` started with whatever settings (the
    store, secrets and data stay on the host)."""
    rows = subprocess.run(["docker", "ps", "-a", "--filter", f"label={LABEL}.project={PROJECT}", "--format",
                           f'{{{{.ID}}}} {{{{.Label "{LABEL}.service"}}}}'],
                          capture_output=True, text=True, check=True).stdout.split("\n")
    found = [row.split(" ", 1) for row in rows if row.strip()]
    for batch in ([c for c, s in found if s == "evaluator"], [c for c, s in found if s != "evaluator"]):
        if batch:
            subprocess.run(["docker", "stop", "--time", str(timeout), *batch], capture_output=True, check=True)
    if found:
        subprocess.run(["docker", "rm", *(c for c, _ in found)], capture_output=True, check=True)
    networks = subprocess.run(["docker", "network", "ls", "-q", "--filter", f"label={LABEL}.project={PROJECT}"],
                              capture_output=True, text=True, check=True).stdout.split()
    if networks:
        subprocess.run(["docker", "network", "rm", *networks], capture_output=True, check=True)
    return sorted(s for _, s in found)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="./dev containers", description=__doc__.split("\n\n")[0])
    actions = p.add_subparsers(dest="action", required=True)
    u = actions.add_parser("up", help="start the containerized mesh (build the images first: ./dev images)")
    u.add_argument("--data", default=".", help="the folder of videos the mesh may read (default: here)")
    actions.add_parser("down", help="stop and remove the mesh's containers")
    args = p.parse_args(argv)
    state = state_dir()
    if args.action == "down":
        # A stopped engine brings the containers back when it starts (restart: unless-stopped):
        # start one to remove them, and stop it again.
        engine = start_engine(state)
        try:
            stopped = down()
        finally:
            stop_engine(engine)
        print(f"stopped and removed: {', '.join(stopped)}" if stopped else "no container of the mesh was there")
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
