"""What a run scores, from the paths it is given (jobs.inputs): every entry of a folder named like a
video is a video to score or a failed item with the reason it cannot be read (a FIFO, a device, a
broken or looping link, a folder), never skipped in silence, and nothing blocks on a FIFO."""
import os
import socket

import pytest
from video_files import gradient, write_video

from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.jobs.inputs import Item, discover, plan, videos_in
from theval_mesh.pure.errors import VideoError

# entry -> the reason it is reported with (None: a video to score)
EXPECTED = {
    "good.mp4": None,
    "fifo.mp4": "a named pipe (FIFO), not a video file",
    "null.mp4": "a symbolic link to /dev/null, a character device, not a video file",
    "loop.mp4": "a symbolic link that loops (it leads back to itself), not a video file",
    "broken.mp4": "a symbolic link to nowhere.mp4, which does not exist",
    ".mp4": "a folder, not a video file",
    "sub/empty.MOV": "a folder, not a video file",
    "folder-link.mp4": "a symbolic link to sub, a folder, not a video file",
    "socket.mp4": "a socket, not a video file",
    "named.mp4/inside.mp4": None,  # a folder named like a video is searched: it holds a video
}


@pytest.fixture
def folder(tmp_path):
    """A model's folder holding one of each kind of entry, and one good clip."""
    root = tmp_path / "model"
    (root / "sub" / "empty.MOV").mkdir(parents=True)
    (root / ".mp4").mkdir()
    (root / "named.mp4").mkdir()
    write_video(root / "good.mp4", gradient(5))
    write_video(root / "named.mp4" / "inside.mp4", gradient(5))
    os.mkfifo(root / "fifo.mp4")
    os.symlink("/dev/null", root / "null.mp4")
    os.symlink("loop.mp4", root / "loop.mp4")
    os.symlink("nowhere.mp4", root / "broken.mp4")
    os.symlink("sub", root / "folder-link.mp4")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(root / "socket.mp4"))
    (root / "notes.txt").write_text("not named like a video: not an entry")
    yield root
    listening.close()


@pytest.mark.timeout(60)  # before the reasons, nothing here blocked; a FIFO opened would
def test_every_entry_named_like_a_video_is_scored_or_failed_with_its_reason(folder):
    items = plan([("m", str(folder))])
    assert {os.path.relpath(i.video, folder): i.missing for i in items} == EXPECTED
    assert videos_in(folder) == [folder / "good.mp4", folder / "named.mp4" / "inside.mp4"]


@pytest.mark.timeout(60)
def test_the_decoder_gives_the_same_reasons_without_opening_the_file(folder):
    for entry, why in EXPECTED.items():
        if why is None:
            MediaReader(folder / entry).close()
            continue
        with pytest.raises(VideoError) as err:
            MediaReader(folder / entry)
        assert err.value.reason == why, entry


def test_a_path_given_alone_is_named_for_what_it_is(folder):
    assert discover("m", str(folder / "fifo.mp4"))[0].missing == EXPECTED["fifo.mp4"]
    assert discover("m", str(folder / "loop.mp4"))[0].missing == EXPECTED["loop.mp4"]
    assert discover("m", str(folder / "nope"))[0].missing == "path not found: check the folder name"
    (folder.parent / "empty").mkdir()
    assert discover("m", str(folder.parent / "empty")) == [
        Item("m", str(folder.parent / "empty"), "no video files (.mp4, .mov, .mkv, .webm, .avi) in the folder")]
