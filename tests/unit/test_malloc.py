"""The allocator thresholds theval_mesh sets on import (theval_mesh/malloc.py), in fresh processes:
a large block freed by a worker thread stays resident for the next allocation, which reuses it,
instead of being unmapped (and faulted in again); glibc's defaults stay where the user asked."""
import json
import os
import subprocess
import sys

import pytest

# A 256 MiB block allocated, written and freed in a thread (as the frame pass's quality thread
# does), twice: the resident MiB after each step.
PROBE = """
import json, os, threading
import numpy as np
import theval_mesh
from theval_mesh import malloc

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

steps = {"start": rss()}
def work():
    for i in range(2):
        block = np.ones(1 << 26, np.float32)
        steps[f"allocated {i}"] = rss()
        del block
        steps[f"freed {i}"] = rss()
thread = threading.Thread(target=work)
thread.start()
thread.join()
print(json.dumps({"state": malloc.tune(), "rss": steps}))
"""
BLOCK = 256  # MiB


def _probe(**env) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k not in ("GLIBC_TUNABLES", "THEVAL_MALLOC")}
    run = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_a_freed_block_is_reused_without_faulting_its_pages_in_again():
    kept = _probe()
    rss = kept["rss"]
    assert kept["state"].startswith("kept")
    assert rss["allocated 0"] - rss["start"] > 0.9 * BLOCK, kept
    assert rss["freed 0"] > rss["allocated 0"] - 0.1 * BLOCK, kept  # kept, not unmapped
    assert rss["allocated 1"] < rss["freed 0"] + 0.1 * BLOCK, kept  # the same memory again


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
@pytest.mark.parametrize("env", [{"THEVAL_MALLOC": "system"}, {"MALLOC_ARENA_MAX": "4"}])
def test_glibcs_defaults_stay_where_the_user_asked_for_them(env):
    system = _probe(**env)
    rss = system["rss"]
    assert system["state"].startswith("system") and next(iter(env)) in system["state"]
    for i in range(2):  # unmapped when freed, mapped and faulted in again
        assert rss[f"allocated {i}"] - rss[f"freed {i}"] > 0.9 * BLOCK, system
