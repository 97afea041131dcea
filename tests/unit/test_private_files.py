"""Logs that name videos and addresses are private to their user, at paths nobody else can plant:
job logs (mode 600 in a mode 700 folder), Triton's default log (a fresh private folder), and a
link planted where a log goes is refused, never followed."""
import os
import stat
import tempfile

import pytest

from theval_mesh.backends.private_files import new_private_folder, open_log, private_folder
from theval_mesh.jobs import drivers
from theval_mesh.pure.errors import UserError


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_job_log_is_private_to_its_user(tmp_path):
    driver, log = drivers.start_driver(tmp_path / "jobs.sqlite", "no-such-job")
    driver.wait(timeout=120)
    assert mode(log.parent) == 0o700 and mode(log) == 0o600
    assert "no-such-job" in log.read_text()  # the driver said why it stopped


def test_the_server_stores_logs_are_in_a_folder_of_this_users():
    folder = drivers.log_path("postgresql://db/theval", "j1").parent
    assert folder.parent == type(folder)(tempfile.gettempdir()) and str(os.getuid()) in folder.name


def test_a_planted_link_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("precious")
    (tmp_path / "job.log").symlink_to(target)
    with pytest.raises(UserError, match="a link is never followed"):
        open_log(tmp_path / "job.log")
    (tmp_path / "logs").symlink_to(tmp_path)
    with pytest.raises(UserError, match="is a link"):
        private_folder(tmp_path / "logs")
    assert target.read_text() == "precious"


def test_an_open_folder_is_closed_and_a_new_one_is_private(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    assert mode(private_folder(folder)) == 0o700
    fresh = new_private_folder("theval-test-")
    try:
        assert mode(fresh) == 0o700
    finally:
        os.rmdir(fresh)


def test_a_log_the_user_names_is_opened_as_given(tmp_path):
    """theval triton up --log /dev/stdout (the Kubernetes manifest's): a link the user chose is
    followed; only the default log path refuses links."""
    from argparse import Namespace

    from theval_mesh.commands.triton import _open_log

    target = tmp_path / "stdout"
    (tmp_path / "link").symlink_to(target)
    with _open_log(Namespace(log=str(tmp_path / "link")), tmp_path / "link") as log:
        log.write("up\n")
    assert target.read_text() == "up\n"
    with pytest.raises(UserError):
        _open_log(Namespace(log=None), tmp_path / "link")
