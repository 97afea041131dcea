"""The containerized mesh against the same mesh as processes, in one run on the same clips.

Prints: each image's size and the time to build them all (`--no-cache`: every layer rebuilt from
the warm wheelhouse; default: what an incremental `./dev images` costs now); each container's cold
start to SERVING (from `compose up`); and the throughput of one EvaluateStream of the clips through
the containers and through `theval serve` processes with the same TLS, tokens and settings,
alternating, best of ROUNDS each (target: containers within 10 % of processes).

    .venv/bin/python bench/containers.py [--no-cache] [CLIPS] [SECONDS] [SIZE]
"""
import sys
import tempfile
import time
from pathlib import Path

from common import kit  # first: puts the repository's root on sys.path (scripts, tests.support)

from scripts import containers, images
from tests.support.mesh_support import Mesh, free_port  # the tests' process mesh
from theval_mesh.rpc import probe
from theval_mesh.rpc.config import DEPENDENCIES
from theval_mesh.rpc.security import ClientSecurity, client_channel
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2, evaluator_pb2_grpc

ROUNDS = 2


def stream_seconds(address: str, security: ClientSecurity, clips) -> float:
    with client_channel(address, security) as channel:
        stub = evaluator_pb2_grpc.EvaluatorServiceStub(channel)
        requests = [evaluator_pb2.EvaluateRequest(id=str(i), video=common_pb2.VideoRef(uri=str(c)))
                    for i, c in enumerate(clips)]
        start = time.perf_counter()
        answers = list(stub.EvaluateStream(iter(requests), timeout=1800))
        seconds = time.perf_counter() - start
    bad = [(a.id, a.detail) for a in answers if a.code or a.response.result.status != "ok"]
    assert len(answers) == len(clips) and not bad, bad
    return seconds


def cold_starts(env) -> dict:
    """Seconds from `compose up` to each container's first SERVING answer."""
    start, ready = time.monotonic(), {}
    containers.compose(env, "up", "-d", "--no-build")
    s = Path(env["THEVAL_SECRETS"])
    while len(ready) < len(containers.SERVICES):
        for service in containers.SERVICES:
            if service not in ready and probe.check({
                    "THEVAL_PORT": env[service.upper() + "_PORT"], "THEVAL_TLS_CERT": str(s / service / "tls.crt"),
                    "THEVAL_TLS_KEY": str(s / service / "tls.key"), "THEVAL_TLS_CA": str(s / "ca.crt")}) == "SERVING":
                ready[service] = time.monotonic() - start
        assert time.monotonic() - start < 600, f"not SERVING: {set(containers.SERVICES) - set(ready)}"
        time.sleep(0.1)
    return ready


def main():
    args = [a for a in sys.argv[1:] if a != "--no-cache"]
    n, seconds, size = (int(args[0]) if args else 3, float(args[1]) if len(args) > 1 else 6.0,
                        int(args[2]) if len(args) > 2 else 256)
    work = Path(tempfile.mkdtemp(prefix="theval-bench-containers-"))
    engine = containers.start_engine(work)
    try:
        start = time.monotonic()
        built = images.build_all(containers.SERVICES + ("triton",), no_cache="--no-cache" in sys.argv)
        build_s = time.monotonic() - start
        k = kit(n_clips=n, duration_s=seconds, size=size, variants=("blur", "static_head"))
        Path(k.out_dir).chmod(0o755)
        clips = [v for variant in ("gt",) + k.variants for v in k.videos(variant)]
        ports = {f"{s.upper()}_{kind}": str(free_port()) for s in containers.SERVICES
                 for kind in ("PORT", "METRICS_PORT")}
        env = containers.environment(Path(k.out_dir), work / "state", {**ports, "THEVAL_QUALITY": "proxy"})
        secrets = Path(env["THEVAL_SECRETS"])
        token = (secrets / "token").read_text().strip()
        client = ClientSecurity(str(secrets / "ca.crt"), token=token)
        try:
            started = cold_starts(env)
            containers.wait_healthy()
            # the same mesh as processes, with the same TLS material (each its own key) and tokens

            def tls(identity):
                return ["--tls-cert", str(secrets / identity / "tls.crt"), "--tls-key", str(secrets / identity / "tls.key")]
            evaluator_key = (str(secrets / "evaluator" / "tls.crt"), str(secrets / "evaluator" / "tls.key"))
            leaf = ClientSecurity(str(secrets / "ca.crt"), *evaluator_key)
            tokens = work / "tokens"
            tokens.write_text(f"bench {token}\n")
            tokens.chmod(0o600)
            procs = Mesh(work, roots=[k.out_dir], service_args={d: tls(d) + ["--tls-client-ca", str(secrets / "ca.crt")]
                                                                 for d in DEPENDENCIES},
                         evaluator_args=tls("evaluator") + ["--tls-ca", str(secrets / "ca.crt"), "--tokens-file",
                                                            str(tokens)],
                         security={**{d: leaf for d in DEPENDENCIES}, "evaluator": client}).start()
            try:
                ways = {"processes": procs.procs["evaluator"].address,
                        "containers": f"127.0.0.1:{env['EVALUATOR_PORT']}"}
                for address in ways.values():  # warm-up
                    stream_seconds(address, client, clips[:1])
                best = {w: min(stream_seconds(a, client, clips) for _ in range(ROUNDS)) for w, a in ways.items()}
            finally:
                procs.stop()
        finally:
            containers.down()
    finally:
        containers.stop_engine(engine)
    print(f"{'image':28} {'size':>9}")
    for b in built:
        print(f"{b['image']:28} {b['bytes'] / 1e9:6.2f} GB")
    how = "--no-cache, from the warm wheelhouse" if "--no-cache" in sys.argv else "incremental"
    print(f"built in {build_s:.0f} s ({how})")
    print("cold start to SERVING (s, from compose up): " + ", ".join(f"{s} {t:.1f}" for s, t in started.items()))
    rate = {w: len(clips) / s for w, s in best.items()}
    print(f"throughput, one EvaluateStream of {len(clips)} videos ({seconds:g} s, {size} px, proxy quality, TLS and "
          f"tokens both ways), best of {ROUNDS}: processes {rate['processes']:.3f} videos/s, containers "
          f"{rate['containers']:.3f} videos/s, containers/processes {rate['containers'] / rate['processes']:.3f} "
          f"(target >= 0.90)")


if __name__ == "__main__":
    main()
