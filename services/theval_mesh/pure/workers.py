"""How many workers `--workers auto` runs, and why. Ray's local start costs 10-35 s and every
worker loads its own models and shares the cores: on 2 cores, 33 videos took 234 s with 2
workers and 166 s with 1, while 100 videos were 12 % faster with 2 (README's side-by-side)."""
AUTO = "auto"
SMALL_MACHINE = 4   # fewer cores: a second worker only pays on a long run
LONG_RUN = 64       # videos that repay Ray's start on a small machine
MANY_VIDEOS = 16    # on 4 cores or more
MOST = 4            # auto never starts more: each worker holds its models in memory


def choose_workers(workers, videos: int, cores: int) -> tuple[int, str | None]:
    """(workers, why) for `workers` (a number, or AUTO) given the videos of the run and the
    machine's cores; why is None for a number given."""
    if workers != AUTO:
        return int(workers), None
    if cores < SMALL_MACHINE:
        if videos >= LONG_RUN and cores >= 2:
            return 2, f"{videos} videos on {cores} cores: a second worker repays Ray's start"
        return 1, (f"{videos} videos on {cores} cores: one worker in this process, as Ray's start and a second "
                   f"copy of the models cost more than they give below {LONG_RUN} videos")
    if videos < MANY_VIDEOS:
        return 1, f"{videos} videos: one worker in this process, as Ray's start costs more than it gives"
    n = max(1, min(cores // 2, MOST, videos // 8))
    return n, f"{videos} videos on {cores} cores: {n} workers, 2 cores each (at most {MOST})"


def notice(workers: int, why: str | None, videos: int) -> str | None:
    """The line a run prints about its workers: only where the choice matters (a run of
    MANY_VIDEOS or more, or more than one worker), never for a number given."""
    if why is None or (workers == 1 and videos < MANY_VIDEOS):
        return None
    return f"workers: {workers} ({why}; --workers N chooses)"


def workers_arg(text: str):
    """--workers: AUTO or a number >= 1 (argparse's type)."""
    if text == AUTO:
        return AUTO
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        import argparse
        raise argparse.ArgumentTypeError(f"{text!r}: a number of workers >= 1, or {AUTO}")
    return n
