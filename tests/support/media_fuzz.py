"""Seeded byte mutations of real video files, and a runner that decodes each mutant in a child
process, so that a native crash (a segfault in ffmpeg or PyAV) is found, named and kept instead of
killing the test run.

    python tests/support/media_fuzz.py BASE.mp4 --seed 1 --count 5000 [--keep DIR]
    python tests/support/media_fuzz.py --decode FILE

prints one JSON summary line: the outcomes by kind, and the mutants that were not a result or a
VideoError (kept in DIR, named by seed and index, to add to tests/data/fuzz once understood);
--decode prints the outcome of one file.
"""
import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data" / "fuzz"
BASES = ("talking_head.mp4", "talking_head.mkv")  # h264 + AAC, 96x96, 2 s: the same streams in two demuxers
# Inputs that once crashed a part of the product (kept as found; each named for what it broke).
CRASHES = sorted(p.name for p in DATA.glob("crash-*"))
INTERESTING = (b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x01", b"\x80\x00\x00\x00")


def mutate(rng: np.random.Generator, data: bytes) -> bytes:
    """One mutant: random bytes anywhere, bytes in the second half (where MP4's moov and most
    headers of the streams sit in these files), interesting 32-bit values there, a truncation, or a
    duplicated chunk."""
    b = bytearray(data)
    half = len(b) // 2
    kind = int(rng.integers(0, 5))
    if kind == 0:
        for _ in range(int(rng.integers(1, 16))):
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
    elif kind == 1:
        for _ in range(int(rng.integers(1, 8))):
            b[int(rng.integers(half, len(b)))] = int(rng.integers(0, 256))
    elif kind == 2:
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(half, len(b) - 4))
            b[at:at + 4] = INTERESTING[int(rng.integers(0, len(INTERESTING)))]
    elif kind == 3:
        b = b[:int(rng.integers(1, len(b)))]
    else:
        i, j = sorted(int(x) for x in rng.integers(0, len(b), 2))
        b[j:j] = b[i:j][:5000]
    return bytes(b)


def mutants(base: Path, seed: int, count: int):
    """(index, bytes) of `count` mutants of `base`, the same for the same seed everywhere."""
    data = base.read_bytes()
    rng = np.random.default_rng(seed)
    for i in range(count):
        yield i, mutate(rng, data)


def decode(path: str) -> str:
    """The outcome of decoding `path` whole, as the product does: "ok", "VideoError", or the name
    of any other exception (a bug)."""
    from theval_mesh.backends.media.decode import MediaReader
    from theval_mesh.pure.errors import VideoError
    try:
        reader = MediaReader(path)
        for _ in reader.frames():
            pass
        MediaReader(path).read_audio()
        return "ok"
    except VideoError:
        return "VideoError"
    except Exception as err:  # noqa: BLE001 - what the fuzzer looks for
        return type(err).__name__


def _child(base: Path, seed: int, start: int, count: int, scratch: Path):
    """Decode mutants start.. in this process, printing each index before and its outcome after:
    the parent knows which one was being decoded when the process died."""
    for i, data in mutants(base, seed, start + count):
        if i < start:
            continue
        path = scratch / f"m{i}{base.suffix}"
        path.write_bytes(data)
        print(f"try {i}", flush=True)
        print(f"done {i} {decode(str(path))}", flush=True)
        path.unlink()


def decode_in_child(path) -> str:
    """decode() in a child process: "crash:<signal>" when the child dies of one."""
    proc = subprocess.run([sys.executable, __file__, "--decode", str(path)], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else f"crash:{-proc.returncode}"


def run(base: Path, seed: int, count: int, scratch: Path, keep: Path | None = None) -> dict:
    """Decode `count` mutants of `base` in child processes (a new one after a native crash).
    Returns {"outcomes": Counter of kinds ("crash:SIGSEGV" for a native crash), "bad": [(index,
    kind)]}; a bad mutant is written to `keep` (when given) as <base stem>-s<seed>-<index><suffix>."""
    outcomes, bad, start = Counter(), [], 0
    data_of = dict(mutants(base, seed, count)) if keep else {}
    while start < count:
        proc = subprocess.run([sys.executable, __file__, "--child", str(base), str(seed), str(start),
                               str(count - start), str(scratch)], capture_output=True, text=True,
                              env={**os.environ, "PYTHONFAULTHANDLER": "1"})
        last = start - 1
        for line in proc.stdout.splitlines():
            word, index, *kind = line.split()
            last = int(index)
            if word == "done":
                outcomes[kind[0]] += 1
                if kind[0] not in ("ok", "VideoError"):
                    bad.append((last, kind[0]))
        if proc.returncode == 0:
            break
        kind = f"crash:{-proc.returncode}" if proc.returncode < 0 else f"exit:{proc.returncode}"
        if last < start:  # died before its first mutant: not the input's doing
            raise RuntimeError(f"the fuzzing child failed ({kind}): {proc.stderr[-2000:]}")
        outcomes[kind] += 1
        bad.append((last, kind))
        start = last + 1
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
        for index, _ in bad:
            (keep / f"{base.stem}-s{seed}-{index}{base.suffix}").write_bytes(data_of[index])
    return {"outcomes": outcomes, "bad": bad}


def main(argv=None) -> int:
    if argv is None and sys.argv[1:2] == ["--child"]:
        base, seed, start, count, scratch = sys.argv[2:]
        _child(Path(base), int(seed), int(start), int(count), Path(scratch))
        return 0
    if argv is None and sys.argv[1:2] == ["--decode"]:
        print(decode(sys.argv[2]))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("base", type=Path)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--keep", type=Path, default=None)
    args = p.parse_args(argv)
    import tempfile
    with tempfile.TemporaryDirectory() as scratch:
        summary = run(args.base, args.seed, args.count, Path(scratch), args.keep)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
