"""--workers auto (the default): one worker in this process where Ray's start and a second copy of
the models cost more than they give (the 2-core figures: 33 videos 166 s with one worker, 234 s
with two; 100 videos 12 % faster with two), more on bigger machines and runs, with the reason."""
import pytest

from theval_mesh.commands.cli import main
from theval_mesh.pure.workers import AUTO, choose_workers, notice


@pytest.mark.parametrize("videos, cores, want", [
    (33, 2, 1), (27, 2, 1), (100, 2, 2), (64, 2, 2), (100, 1, 1),
    (10, 16, 1), (16, 16, 2), (100, 16, 4), (100, 4, 2),
])
def test_auto_picks_what_helps_on_the_machine(videos, cores, want):
    n, why = choose_workers(AUTO, videos, cores)
    assert n == want and f"{videos} videos" in why


def test_a_number_given_is_kept_and_not_explained():
    assert choose_workers(3, 5, 2) == (3, None)


def test_a_bad_number_of_workers_is_bad_usage(capsys, tmp_path):
    with pytest.raises(SystemExit) as stop:
        main(["evaluate", "--gt", str(tmp_path), "--out", str(tmp_path / "o"), "--workers", "0"])
    assert stop.value.code == 2 and "a number of workers >= 1, or auto" in capsys.readouterr().err


def test_the_choice_is_said_where_it_matters():
    assert notice(*choose_workers(AUTO, 33, 2), 33).startswith("workers: 1 (33 videos on 2 cores: one worker")
    assert notice(*choose_workers(AUTO, 100, 2), 100).startswith("workers: 2 (100 videos on 2 cores")
    assert notice(*choose_workers(AUTO, 4, 2), 4) is None  # a handful of videos: nothing to say
    assert notice(*choose_workers(3, 33, 2), 33) is None  # the user's own number
