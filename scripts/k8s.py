"""The Kubernetes manifests' helpers: `./dev k8s secrets OVERLAY`, `./dev k8s render OVERLAY`.

`secrets` makes what an overlay's secretGenerator reads from k8s/overlays/OVERLAY/secrets/ (kept
out of git): a CA, one certificate for every Service of the mesh by its in-cluster names (the
evaluator presents it to the services, the services to Triton), the evaluator's tokens file and
the token its clients use, Ray's token (ray-token); where the overlay's evaluator uses PostgreSQL,
the store's URL (to edit: your database's) and a new password (to set on its role, or replace by
yours). Kept when present. Production clusters may bring their own (cert-manager, an external
secret store): the files' names are the contract.

`render` prints the overlay as `kubectl kustomize` renders it (what `kubectl apply -k` applies).
"""
import argparse
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import containers  # noqa: E402  (scripts/)

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "k8s"
OVERLAYS = ("dev", "gpu")
SECRET_FILES = ("tls.crt", "tls.key", "ca.crt", "tokens")
STORE_FILES = ("store-url", "store-password")  # overlays whose evaluator keeps its store in PostgreSQL
# Verified TLS against the system's CAs (a managed database); the host is the one line to change.
STORE_URL = "postgresql://theval@postgres.example.internal:5432/theval?sslmode=verify-full&sslrootcert=system"
SERVICES = containers.SERVICES + ("triton",)  # the Services that serve TLS


def namespace() -> str:
    return yaml.safe_load((K8S / "base" / "kustomization.yaml").read_text())["namespace"]


def dns_names(ns: str) -> list[str]:
    return [n for s in SERVICES for n in (s, f"{s}.{ns}", f"{s}.{ns}.svc", f"{s}.{ns}.svc.cluster.local")]


def secret_files(overlay_dir: Path) -> list[str]:
    """The files the overlay's secretGenerator reads from secrets/ (its kustomization says)."""
    kustomization = yaml.safe_load((overlay_dir / "kustomization.yaml").read_text())
    return [source.rpartition("=")[2].removeprefix("secrets/")
            for generator in kustomization.get("secretGenerator", []) for source in generator.get("files", [])]


def make_secrets(overlay_dir: Path) -> Path:
    """overlay_dir/secrets/: tls.crt, tls.key, ca.crt, tokens (and `token`, the clients' own), and
    Ray's token and the store's URL and password where the overlay asks for them."""
    folder = overlay_dir / "secrets"
    folder.mkdir(exist_ok=True)
    wanted = secret_files(overlay_dir)
    for name, text in (("store-url", STORE_URL), ("store-password", secrets.token_urlsafe(24)),
                       ("ray-token", secrets.token_hex(32))):
        if name in wanted and not (folder / name).is_file():
            (folder / name).write_text(text)  # no newline: the Secret's value is the whole file
            (folder / name).chmod(0o600)
    if all((folder / f).is_file() for f in SECRET_FILES):
        return folder
    work = folder / ".pki"
    containers.make_secrets(work, user=containers.CONTAINER_USER, dns_names=dns_names(namespace()))
    for src, dst in (("server.crt", "tls.crt"), ("server.key", "tls.key"), ("ca.crt", "ca.crt"),
                     ("tokens", "tokens"), ("token", "token")):
        shutil.copy2(work / src, folder / dst)
    shutil.rmtree(work)  # the CA's key with it: new material is made whole, never signed later
    return folder


def render(overlay_dir: Path, kubectl: str = "kubectl") -> list[dict]:
    """The overlay's objects, as `kubectl kustomize` renders them."""
    done = subprocess.run([kubectl, "kustomize", str(overlay_dir)], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{kubectl} kustomize {overlay_dir} failed: {done.stderr.strip()}")
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="./dev k8s", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    for name, text in (("secrets", "make the overlay's TLS material and tokens (kept when present)"),
                       ("render", "print the overlay as kubectl kustomize renders it")):
        a = sub.add_parser(name, help=text)
        a.add_argument("overlay", choices=OVERLAYS)
    args = p.parse_args(argv)
    overlay = K8S / "overlays" / args.overlay
    if args.action == "secrets":
        folder = make_secrets(overlay)
        wanted = secret_files(overlay)
        print(f"{folder}: {', '.join(wanted)}; the API token for clients is in {folder / 'token'}")
        if "store-url" in wanted:
            print(f"the evaluator's store: put your PostgreSQL database's URL in {folder / 'store-url'} (now "
                  f"{(folder / 'store-url').read_text()}) and set the password of {folder / 'store-password'} on "
                  "its role (or write yours there)")
        print(f"apply with: kubectl apply -k {overlay.relative_to(ROOT)}")
        return 0
    missing = [f for f in secret_files(overlay) if not (overlay / "secrets" / f).is_file()]
    if missing:
        print(f"error: {overlay.relative_to(ROOT)}/secrets/ is missing {', '.join(missing)}: "
              f"run ./dev k8s secrets {args.overlay} (or put your own there)", file=sys.stderr)
        return 1
    done = subprocess.run(["kubectl", "kustomize", str(overlay)])
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
