"""What a run scores, from the paths it is given (core.inputs): every entry of a folder named like a
video is a video to score or a failed item with the reason it cannot be read (a FIFO, a device, a
broken or looping link, a folder), never skipped in silence, and nothing blocks on a FIFO; a model
name given as NAME=DIR is never cut at an '=' it holds."""
import os
import socket

import pytest

from tests.support.video_files import gradient, write_video
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.commands.cli import main
from theval_mesh.core.inputs import Item, discover, parse_model_arg, plan, videos_in
from theval_mesh.pure.errors import UserError, VideoError
from theval_mesh.studies.study_server import model_folders

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


# ------------------------------------------------------------------------------ --model NAME=DIR
def one_line_error(capsys, argv) -> str:
    assert main(argv) == 2  # bad usage (docs/usage.md's exit codes)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("command", [["evaluate"], ["bulk", "submit"]])
def test_a_model_name_holding_an_equals_sign_is_refused_with_how_to_write_it(tmp_path, capsys, command):
    """Before: --model a=b=DIR named the model 'a' and looked for the folder 'b=DIR'."""
    (tmp_path / "gt").mkdir()
    (tmp_path / "videos").mkdir()
    store = ["--store", str(tmp_path / "jobs.sqlite")] if command[0] == "bulk" else ["--out", str(tmp_path / "out")]
    err = one_line_error(capsys, [*command, "--gt", str(tmp_path / "gt"), "--model", f"a=b={tmp_path}/videos", *store])
    assert f"no folder 'b={tmp_path}/videos', and a model name cannot hold '='" in err
    assert f"--model a_b={tmp_path}/videos" in err
    assert not (tmp_path / "jobs.sqlite").exists() and not (tmp_path / "out").exists()  # refused before anything


def test_a_folder_holding_an_equals_sign_is_a_folder_and_names_follow_the_rules(tmp_path):
    folder = tmp_path / "lr=0.1"
    folder.mkdir()
    assert parse_model_arg(f"m={folder}") == ("m", str(folder))
    for bad in (f"-m={folder}", f"a,b={folder}", f" m={folder}"):
        with pytest.raises(UserError, match="--model name .*: use 1-128 letters, digits"):
            parse_model_arg(bad)
    with pytest.raises(UserError, match="a model name cannot hold '='"):
        model_folders([f"a=b={folder}", str(folder)])  # theval study serve --models: the same parsing
