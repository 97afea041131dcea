"""What the container tests share with the session: a Docker engine (started when none answers,
stopped when the session ends) and the images, built in the background from the moment the
tests are collected (minutes when cold: the torch layers), while the other tests run; the
container tests are ordered last so that they rarely wait."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from scripts import containers

ROOT = Path(__file__).resolve().parents[2]
CONTAINER_TESTS = ("test_containers.py", "test_k8s_dev_overlay.py")
IMAGES = containers.SERVICES + ("triton",)


def is_container_test(test) -> bool:
    """`test`: a collected item, or a node id (what xdist's controller gets)."""
    return Path(getattr(test, "nodeid", test).split("::")[0]).name in CONTAINER_TESTS


class Prebuild:
    """The engine and a background `scripts/images.py` run, in `folder`: its log, its report, and
    its exit code in `status` when it ends (what another process of the run waits for)."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.engine = containers.start_engine(folder)
        script = '"$0" "$1" --json "$2/images.json" "${@:3}" > "$2/images.log" 2>&1; echo $? > "$2/.status"; ' \
                 'mv "$2/.status" "$2/status"'
        self.proc = subprocess.Popen(["bash", "-c", script, sys.executable, str(ROOT / "scripts" / "images.py"),
                                      str(folder), *IMAGES], start_new_session=True)

    def wait(self) -> dict:
        """{image name: {image, bytes, seconds}} once every image is built."""
        self.proc.wait()
        return self.wait_elsewhere(self.folder)

    @staticmethod
    def wait_elsewhere(folder: Path) -> dict:
        """The report of a build that another process of the run started (xdist's controller)."""
        status = folder / "status"
        while not status.is_file():
            time.sleep(2)  # bounded by the test's timeout
        if status.read_text().strip() != "0":
            raise RuntimeError(f"building the images failed:\n{(folder / 'images.log').read_text()[-4000:]}")
        return {b["image"].split("/")[1].split(":")[0]: b for b in json.loads((folder / "images.json").read_text())}

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the shell and the build it runs
            self.proc.wait()
        containers.stop_engine(self.engine)  # only an engine this session started
