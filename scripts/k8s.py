"""The Kubernetes manifests' helpers: `./dev k8s secrets OVERLAY`, `./dev k8s render OVERLAY`.

`secrets` makes what an overlay's secretGenerator reads from k8s/overlays/OVERLAY/secrets/ (kept
out of git): per identity (each service, the evaluator, Triton) a folder with its own key, its
certificate named for its Service's in-cluster names, and the CA's certificate, which becomes the
Secret `theval-tls-IDENTITY` that its Deployment alone mounts (the CA's key is not kept: new
material is made whole); the evaluator's tokens file and the token its clients use; Ray's token
(ray-token); where the overlay's evaluator uses PostgreSQL, the store's URL (to edit: your database's) and a new password
(to set on its role, or replace by yours). Kept when present. Production clusters may bring their
own (cert-manager, an external secret store): the files' names are the contract.

`render` prints the overlay as `kubectl kustomize` renders it (what `kubectl apply -k` applies).
"""
import argparse
import secrets
import subprocess
import sys
from pathlib import Path

import yaml

from theval_mesh.pure.services import SERVICES

if __package__:  # imported as scripts.k8s (the tests)
    from scripts import containers
else:  # run as a file (./dev k8s): scripts/ is first on sys.path
    import containers

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "k8s"
OVERLAYS = ("dev", "gpu")
STORE_FILES = ("store-url", "store-password")  # overlays whose evaluator keeps its store in PostgreSQL
# Verified TLS against the system's CAs (a managed database); the host is the one line to change.
STORE_URL = "postgresql://theval@postgres.example.internal:5432/theval?sslmode=verify-full&sslrootcert=system"
IDENTITIES = SERVICES + ("triton",)  # the servers of TLS, each with its own key and certificate


def namespace() -> str:
    return yaml.safe_load((K8S / "base" / "kustomization.yaml").read_text())["namespace"]


def dns_names(identity: str, ns: str) -> list[str]:
    """The names a caller in the cluster reaches the identity's Service by."""
    return [identity, f"{identity}.{ns}", f"{identity}.{ns}.svc", f"{identity}.{ns}.svc.cluster.local"]


def secret_files(overlay_dir: Path) -> list[str]:
    """The files the overlay's secretGenerator reads from secrets/ (its kustomization says)."""
    kustomization = yaml.safe_load((overlay_dir / "kustomization.yaml").read_text())
    return [source.rpartition("=")[2].removeprefix("secrets/")
            for generator in kustomization.get("secretGenerator", []) for source in generator.get("files", [])]


def make_secrets(overlay_dir: Path) -> Path:
    """overlay_dir/secrets/: IDENTITY/{tls.crt,tls.key,ca.crt} per identity, evaluator/tokens,
    ca.crt and `token` (the clients' own), and Ray's token and the store's URL and password where
    the overlay asks for them."""
    folder = overlay_dir / "secrets"
    folder.mkdir(exist_ok=True)
    wanted = secret_files(overlay_dir)
    for name, text in (("store-url", STORE_URL), ("store-password", secrets.token_urlsafe(24)),
                       ("ray-token", secrets.token_hex(32))):
        if name in wanted and not (folder / name).is_file():
            (folder / name).write_text(text)  # no newline: the Secret's value is the whole file
            (folder / name).chmod(0o600)
    ns = namespace()
    return containers.make_secrets(folder, {i: dns_names(i, ns) for i in IDENTITIES}, user=None)


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
        print(f"{folder}: {', '.join(wanted)}; for clients: the CA's certificate {folder / 'ca.crt'} and the API "
              f"token {folder / 'token'}")
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
