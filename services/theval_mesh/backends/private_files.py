"""Logs only their user can read, at paths nobody else can plant: a log names videos, folders and
addresses, and a predictable name in a shared temporary folder can be a link to anywhere."""
import os
import tempfile
from pathlib import Path

from theval_mesh.pure.errors import UserError


def private_folder(path) -> Path:
    """`path` made (mode 700) or checked: a real folder of this user's, which nobody else can enter."""
    path = Path(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if os.path.islink(path) or st.st_uid != os.getuid():
        raise UserError(f"{path} is a link or another user's folder: logs are not written there; remove it")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def new_private_folder(prefix: str) -> Path:
    """A new folder of this user's (mode 700) in the temporary folder, under an unpredictable name."""
    return Path(tempfile.mkdtemp(prefix=prefix))


def open_log(path):
    """`path` opened to append (created mode 600); a link there is refused, never followed."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as err:
        raise UserError(f"cannot open the log {path}: {err.strerror} (a link is never followed)") from None
    return os.fdopen(fd, "a")
