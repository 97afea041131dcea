import pytest

from tests.support.inprocess_mesh import MAX_VIDEO_BYTES, InProcessMesh


@pytest.fixture(scope="session")
def inprocess_mesh(tmp_path_factory):
    """The four leaf services and the evaluator in this process on loopback ports, real backends
    (quality: the proxy), one FaceMesh pass by default; videos go under `mesh.root`. One per test
    session: the evaluator can be built once per process (see inprocess_mesh.py)."""
    root = tmp_path_factory.mktemp("mesh-videos")
    mesh = InProcessMesh(tmp_path_factory.mktemp("mesh"), [root], single_pass=True, max_video_bytes=MAX_VIDEO_BYTES)
    mesh.start()
    yield mesh
    mesh.stop()
