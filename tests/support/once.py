"""What a test run computes once for all its processes: xdist's workers are separate processes,
so a session fixture would run in each (the kit's evaluation cost 11 minutes per worker).

The run's shared folder is THEVAL_TEST_SHARED, made by tests/conftest.py in the controller and
inherited by the workers."""
import fcntl
import os
import pickle
from pathlib import Path


def shared_folder(name: str) -> Path:
    """A folder of the run's shared folder (made if missing)."""
    folder = Path(os.environ["THEVAL_TEST_SHARED"]) / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def once_per_run(name: str, make):
    """make()'s value, made by whichever process asks first while the others wait on a lock, then
    loaded from its pickle. A make() that raises leaves nothing: the next process tries again."""
    folder = shared_folder("once")
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = folder / f"{name}.pickle"
        if done.is_file():
            return pickle.loads(done.read_bytes())
        value = make()
        done.write_bytes(pickle.dumps(value))
        return value
