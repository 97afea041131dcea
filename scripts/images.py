"""Build the project's container images, offline: `./dev images [NAME ...] [--base IMAGE]`.

1. The base. `--base IMAGE` if given; else the official python:3.11-slim-bookworm when the engine
   has it or can pull it; else a base made from Debian's packages (mmdebstrap, then `docker
   import`): python 3.11 and what the images load from the system (OpenCV's libGL for landmarks).
2. The wheelhouse: every wheel the images install, made by pip on the host from constraints.txt,
   in the user's cache; reused while constraints.txt and pyproject.toml are unchanged (the
   project's own wheel is rebuilt each time).
3. Each image's build context: exactly the wheels it installs (hard links), resolved offline by
   pip against the wheelhouse, minus those of its parent (the torch runtime); then `docker build
   --network none` with BuildKit, so nothing is downloaded and the layer cache makes rebuilds
   incremental. The Dockerfiles bind-mount the wheels for their installs: no layer holds a wheel,
   and each venv is stored once (a copied wheel layer and a build stage cost the torch runtime
   three times its size on disk).
4. The images an earlier build made and this one superseded (old tags: gigabytes each time the
   dependencies change) are removed, and BuildKit's copies of the build contexts; nothing this
   project did not build is touched.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from theval_mesh.pure.services import BY_NAME, TABLE

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
OFFICIAL_BASE = "python:3.11-slim-bookworm"
REPOSITORY = "theval"  # images are theval/NAME:VERSION


@dataclass(frozen=True)
class Image:
    name: str
    requirement: str          # what pip resolves for it
    parent: str | None = None  # an image of this table it starts FROM (its wheels are not repeated)
    gl: bool = False          # needs OpenCV's system libraries (libGL, GLib)
    files: tuple = ()         # project folders copied into the context
    own_base: bool = False    # keeps its Dockerfile's BASE (NVIDIA's), built only when named
    on_request: bool = False  # an opt-in variant, built only when named
    # A service's image: its Dockerfile is made from a template by scripts/dockerfiles.py.
    service: str | None = None  # the service its entrypoint runs
    summary: str = ""           # what it serves: its description label and first comment line
    notes: str = ""             # more of its Dockerfile's first comment
    health_start_s: int = 0     # its health check's start period: how long its models may take to load


def service_image(service: str, **build) -> Image:
    """The image of a service: its name and extra are its row's in the service table."""
    row = BY_NAME[service]
    return Image(row.image, f"theval-mesh[{row.extra}]", service=service, **build)


IMAGES = {i.name: i for i in (
    # The shared PyTorch runtime, pinned by constraints.txt; with OpenCV's system libraries: pyiqa
    # and the quality proxy import cv2.
    Image("torch", "torch", gl=True),
    service_image("landmarks", gl=True, health_start_s=120,
                  summary="The landmarks service: MediaPipe FaceMesh over a video's frames (no torch)."),
    service_image("headpose", health_start_s=60,
                  summary="The head-pose service: angles from the landmarks (numpy only)."),
    # The head-pose service that can serve FaceXFormer (--headpose facexformer): torch on the shared
    # runtime. Opt-in (`./dev images headpose-facexformer`): the default headpose image stays small.
    Image("headpose-facexformer", "theval-mesh[facexformer]", parent="torch", on_request=True, service="headpose",
          health_start_s=120,
          summary="The head-pose service with FaceXFormer and retina-face (opt-in: --headpose facexformer).",
          notes="Built only when named (`./dev images headpose-facexformer`): docker/headpose.Dockerfile stays the "
                "small default, the rigid fit without torch. Run it with THEVAL_HEADPOSE=facexformer, THEVAL_WEIGHTS "
                "(a store holding model.pt and retinaface.h5) and THEVAL_ALLOWED_ROOTS (it reads the videos)."),
    service_image("quality", parent="torch", health_start_s=300,
                  summary="The quality service: IQA/IAA models with pyiqa (or the labelled training-free proxy)."),
    service_image("audio", health_start_s=60,
                  summary="The audio service: Silero VAD (ONNX, no torch) and loudness."),
    service_image("evaluator", health_start_s=60,
                  summary="The evaluator: composes the services into the 8 metrics and the Final Score; bulk jobs "
                          "on Ray."),
    Image("triton", "theval-mesh[triton]", parent="torch", files=("triton_models",)),
    Image("worker", "theval-mesh[worker]", parent="torch"),
    Image("triton-gpu", "theval-mesh[triton]", files=("triton_models",), own_base=True),
)}
SERVICE_IMAGES = tuple(s.image for s in TABLE)
# The Debian packages of the offline bases: what python:3.11-slim-bookworm has, plus what the
# Dockerfiles would install from Debian on it (libGL and GLib for OpenCV).
BASE_PACKAGES = ("python3.11", "python3-venv", "libpython3.11", "ca-certificates")
GL_PACKAGES = ("libgl1", "libglib2.0-0")


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "theval" / "images"


def version() -> str:
    return re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)


def revision() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def tag(name: str) -> str:
    return f"{REPOSITORY}/{name}:{version()}"


def log(message: str):
    print(f"==> {message}", flush=True)


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def have_image(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0


def image_id(ref: str) -> str:
    return subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", ref], capture_output=True, text=True,
                          check=True).stdout.strip().removeprefix("sha256:")[:12]


def image_size(ref: str) -> int:
    out = subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", ref], capture_output=True, text=True,
                         check=True).stdout
    return int(out.strip())


# -- the base --------------------------------------------------------------------------------------

def debian_base(packages: tuple) -> str:
    """A base image from Debian bookworm's packages (mmdebstrap minbase), imported once."""
    digest = hashlib.sha256(" ".join(packages).encode()).hexdigest()[:12]
    ref = f"{REPOSITORY}/base:bookworm-{digest}"
    if have_image(ref):
        return ref
    if not shutil.which("mmdebstrap"):
        raise SystemExit("error: the registry's base image cannot be pulled and mmdebstrap is missing: "
                         "`apt-get install mmdebstrap`, or pass --base IMAGE")
    tar = cache_dir() / f"base-{digest}.tar"
    tar.parent.mkdir(parents=True, exist_ok=True)
    log(f"making base {ref} from Debian packages: {', '.join(packages)} (about a minute)")
    run(["mmdebstrap", "--quiet", "--variant=minbase", f"--include={','.join(packages)}", "bookworm", tar])
    run(["docker", "import", "--message", f"mmdebstrap minbase bookworm + {' '.join(packages)}", tar, ref],
        stdout=subprocess.DEVNULL)
    tar.unlink()
    return ref


def bases(given: str | None) -> dict:
    """{False: base, True: base with OpenCV's system libraries}."""
    if given:
        return {False: given, True: given}
    if have_image(OFFICIAL_BASE) or subprocess.run(["docker", "pull", "-q", OFFICIAL_BASE], capture_output=True,
                                                   timeout=300).returncode == 0:
        return {False: OFFICIAL_BASE, True: OFFICIAL_BASE}  # the Dockerfiles add libGL from Debian
    log(f"{OFFICIAL_BASE} cannot be pulled here: using bases made from Debian's packages")
    return {False: debian_base(BASE_PACKAGES), True: debian_base(BASE_PACKAGES + GL_PACKAGES)}


# -- the wheelhouse --------------------------------------------------------------------------------

def wheelhouse() -> Path:
    """The wheels of every image; rebuilt when constraints.txt or pyproject.toml changed."""
    stamp = hashlib.sha256((ROOT / "constraints.txt").read_bytes() + (ROOT / "pyproject.toml").read_bytes())
    folder = cache_dir() / "wheelhouse"
    stamp_file = folder / ".inputs-sha256"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    if stamp_file.is_file() and stamp_file.read_text() == stamp.hexdigest():
        log(f"wheelhouse up to date ({folder})")
        run(pip + ["wheel", "-q", "--no-deps", "-w", folder, ROOT], stdout=subprocess.DEVNULL)  # the project itself
        return folder
    log(f"building the wheelhouse in {folder} (every image's wheels, from constraints.txt)")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    run(pip + ["wheel", "-q", "--no-deps", "-w", folder, ROOT], stdout=subprocess.DEVNULL)
    extras = sorted({m.group(1) for i in IMAGES.values() for m in [re.search(r"\[(\w+)\]", i.requirement)] if m})
    run(pip + ["wheel", "-q", "-w", folder, "-c", ROOT / "constraints.txt", "--find-links", folder,
               f"theval-mesh[{','.join(extras)}]"], stdout=subprocess.DEVNULL)
    stamp_file.write_text(stamp.hexdigest())
    return folder


def resolve(requirement: str, wheels: Path) -> dict:
    """{distribution name: wheel file} pip installs for `requirement` from the wheelhouse alone
    (no configuration, no index: what the image's offline install will find)."""
    report = wheels.parent / "resolve-report.json"
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
    run([sys.executable, "-m", "pip", "--disable-pip-version-check", "install", "-q", "--dry-run",
         "--ignore-installed", "--no-index", "--find-links", wheels, "-c", ROOT / "constraints.txt",
         "--report", report, requirement], env=env, stdout=subprocess.DEVNULL)
    items = json.loads(report.read_text())["install"]
    report.unlink()
    return {i["metadata"]["name"].lower(): Path(i["download_info"]["url"].removeprefix("file://")) for i in items}


def context(image: Image, wheels: Path) -> Path:
    """The build context: wheels/ the third-party wheels it installs beyond its parent's, project/
    the project's own wheel (its own layer: a code change leaves the others cached), its files."""
    wanted = resolve(image.requirement, wheels)
    if image.parent:
        for name in resolve(IMAGES[image.parent].requirement, wheels):
            wanted.pop(name, None)
    folder = cache_dir() / "contexts" / image.name
    shutil.rmtree(folder, ignore_errors=True)
    for name, path in wanted.items():
        target = folder / ("project" if name == "theval-mesh" else "wheels") / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)
    for name in image.files:
        shutil.copytree(ROOT / name, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


# -- the images ------------------------------------------------------------------------------------

def buildkit_client() -> list[str]:
    """A docker client that builds with BuildKit (the Dockerfiles mount their wheels): one with the
    buildx plugin (Docker 23 and later), or a 20.10 client, whose BuildKit is built in (Debian's
    docker.io has no buildx). The first such `docker` on PATH."""
    seen = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        exe = Path(folder) / "docker"
        if not (exe.is_file() and os.access(exe, os.X_OK)) or exe.resolve() in seen:
            continue
        seen.append(exe.resolve())
        if subprocess.run([exe, "buildx", "version"], capture_output=True).returncode == 0:
            return [str(exe), "build"]
        client = subprocess.run([exe, "version", "-f", "{{.Client.Version}}"], capture_output=True, text=True)
        if re.match(r"(1\d|20)\.", client.stdout.strip()):
            return [str(exe), "build"]
    raise SystemExit("error: no docker client here builds with BuildKit: install the buildx plugin "
                     "(docker-buildx-plugin, or Debian's docker.io 20.10, whose client has BuildKit built in)")


def build(image: Image, base: dict, wheels: Path, no_cache: bool = False) -> dict:
    """docker build one image; returns its tag, size, build seconds and id."""
    start = time.monotonic()
    folder = context(image, wheels)
    args = {"VERSION": version(), "REVISION": revision(),
            "SOURCE": os.environ.get("THEVAL_IMAGE_SOURCE", "theval-mesh")}
    if not image.own_base:
        args["BASE"] = base[image.gl]
    if image.parent:
        args["TORCH"] = tag(image.parent)
    cmd = buildkit_client() + ["--progress", "plain", "--network", "none",
                               "-f", DOCKER / f"{image.name}.Dockerfile",
                               "-t", tag(image.name), "-t", f"{REPOSITORY}/{image.name}:latest"]
    for key, value in args.items():
        cmd += ["--build-arg", f"{key}={value}"]
    if no_cache:
        cmd.append("--no-cache")
    log(f"building {tag(image.name)}")
    done = subprocess.run([str(c) for c in cmd + [folder]], capture_output=True, text=True,
                          env={**os.environ, "DOCKER_BUILDKIT": "1"})
    if done.returncode != 0:
        raise SystemExit(f"error: building {tag(image.name)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    shutil.rmtree(folder, ignore_errors=True)
    return {"image": tag(image.name), "bytes": image_size(tag(image.name)),
            "seconds": round(time.monotonic() - start, 1), "used": [image_id(tag(image.name))]}


def ledger_file() -> Path:
    """What each image's builds made ({image name: image ids}): so that only those are removed."""
    return cache_dir() / "built-images.json"


def read_ledger() -> dict:
    return json.loads(ledger_file().read_text()) if ledger_file().is_file() else {}


def dangling() -> set:
    return set(subprocess.run(["docker", "images", "-q", "--filter", "dangling=true"], capture_output=True,
                              text=True).stdout.split())


def remember(ids: dict, keep=frozenset()):
    """Record `ids` ({image name: ids}) as this project's, replacing what a name had except `keep`."""
    ledger = read_ledger()
    for name, new in ids.items():
        ledger[name] = sorted(set(new) | (set(ledger.get(name, ())) & set(keep)))
    ledger_file().parent.mkdir(parents=True, exist_ok=True)
    ledger_file().write_text(json.dumps(ledger, indent=1))


def remove_superseded(used: dict) -> int:
    """Remove the dangling images that earlier builds of these images made and this build no longer
    uses ({image name: ids used}); returns how many. Images this project did not build, and the
    build cache of images not rebuilt now, are never touched."""
    ledger = read_ledger()
    earlier = {i for name in used for i in ledger.get(name, ())}
    stale = sorted((earlier & dangling()) - set().union(*used.values()))
    if stale:
        subprocess.run(["docker", "rmi", *stale], capture_output=True)  # one still a parent stays
    remember(used, keep=dangling())  # and is tried again next time
    return len(stale)


def drop_context_copies():
    """BuildKit keeps a copy of each build context it was sent (the torch runtime's: its wheels, GBs)
    to speed up the next transfer; the images need none of it. Only those copies are dropped."""
    subprocess.run(["docker", "builder", "prune", "-f", "--filter", "type=source.local"], capture_output=True)


def warn_if_short_of_disk(need: float = 16e9):
    """A build that runs out of disk fails deep in a layer copy: say so before it starts."""
    root = subprocess.run(["docker", "info", "-f", "{{.DockerRootDir}}"], capture_output=True, text=True).stdout.strip()
    free = shutil.disk_usage(root).free if root and Path(root).is_dir() else need
    if free < need:
        log(f"warning: {free / 1e9:.1f} GB free under {root}; building every image from nothing takes about "
            f"{need / 1e9:.0f} GB (a rebuild far less). `docker image prune` frees what other builds left behind")


def build_all(names=None, base: str | None = None, no_cache: bool = False) -> list[dict]:
    """Build `names` (default: every image) and the parents they need, in order."""
    names = list(names or [n for n, i in IMAGES.items() if not (i.own_base or i.on_request)])
    unknown = sorted(set(names) - set(IMAGES))
    if unknown:
        raise SystemExit(f"error: unknown image {', '.join(unknown)}; the images: {', '.join(IMAGES)}")
    order = [n for n in IMAGES if n in names or any(IMAGES[m].parent == n for m in names)]
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        raise SystemExit("error: no Docker engine answers; start one (`dockerd &`, or `./dev containers up`, which "
                         "starts one when none runs) and try again")
    warn_if_short_of_disk()
    base_images = bases(base) if any(not IMAGES[n].own_base for n in order) else {}
    wheels = wheelhouse()
    built = [build(IMAGES[n], base_images, wheels, no_cache) for n in order]
    removed = remove_superseded({name: set(b.pop("used")) for name, b in zip(order, built)})
    drop_context_copies()
    if removed:
        log(f"removed {removed} superseded image(s) of earlier builds")
    return built


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="./dev images", description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", metavar="NAME",
                   help=f"images to build (default all but triton-gpu and headpose-facexformer: "
                        f"{', '.join(IMAGES)})")
    p.add_argument("--base", default=None, metavar="IMAGE",
                   help=f"base image of every image (default {OFFICIAL_BASE}, or one made from Debian's packages "
                        "when it cannot be pulled)")
    p.add_argument("--no-cache", action="store_true", help="rebuild every layer (the wheelhouse is still reused)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write what was built, with sizes, to FILE")
    args = p.parse_args(argv)
    start = time.monotonic()
    built = build_all(args.names, args.base, args.no_cache)
    if args.json:
        Path(args.json).write_text(json.dumps(built, indent=1))
    print(f"{'image':32} {'size':>10} {'build':>8}")
    for b in built:
        print(f"{b['image']:32} {b['bytes'] / 1e6:8.0f} MB {b['seconds']:7.1f}s")
    print(f"all built in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
