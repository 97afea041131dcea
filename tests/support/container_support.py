"""What the container tests share with the session: a Docker engine (started when none answers,
stopped when the session ends) and the images, built in the background from the moment the
tests are collected (minutes when cold: the torch layers), while the other tests run; the
container tests are ordered last so that they rarely wait."""
import json
import subprocess
import sys
from pathlib import Path

from scripts import containers

ROOT = Path(__file__).resolve().parents[2]
CONTAINER_TESTS = ("test_containers.py", "test_k8s_dev_overlay.py")
IMAGES = containers.SERVICES + ("triton",)


def is_container_test(item) -> bool:
    return Path(str(item.fspath)).name in CONTAINER_TESTS


class Prebuild:
    """The engine and a background `scripts/images.py` run; wait() gives its report."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.engine = containers.start_engine(folder)
        self.report, self.log = folder / "images.json", folder / "images.log"
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "images.py"), "--json", str(self.report),
                                      *IMAGES], stdout=open(self.log, "w"), stderr=subprocess.STDOUT)

    def wait(self) -> dict:
        """{image name: {image, bytes, seconds}} once every image is built."""
        if self.proc.wait() != 0:
            raise RuntimeError(f"building the images failed:\n{self.log.read_text()[-4000:]}")
        return {b["image"].split("/")[1].split(":")[0]: b for b in json.loads(self.report.read_text())}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()
        containers.stop_engine(self.engine)  # only an engine this session started
