"""What a path names when it is not a video file to read, in words a user can act on: the same
for a scanned input folder (core.inputs) and for a video opened (decode). The path is never
opened: a FIFO would block its reader until some writer came."""
import errno
import os
import stat

KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def not_a_file(path) -> str | None:
    """Why `path` cannot be read as a video file; None for a regular file (or a link to one)."""
    try:
        mode = os.stat(path).st_mode  # through links
    except OSError as err:
        if not os.path.islink(path):
            return "file not found: check the path" if err.errno == errno.ENOENT else f"cannot be read: {err.strerror}"
        if err.errno == errno.ELOOP:
            return "a symbolic link that loops (it leads back to itself), not a video file"
        return f"a symbolic link to {os.readlink(path)}, which does not exist"
    if stat.S_ISREG(mode):
        return None
    kind = next((name for is_kind, name in KINDS if is_kind(mode)), "not a regular file")
    link = f"a symbolic link to {os.readlink(path)}, " if os.path.islink(path) else ""
    return f"{link}{kind}, not a video file"
