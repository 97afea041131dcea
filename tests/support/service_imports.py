"""What a mesh service process imports when it starts (shared by the test and the benchmark).

Run as a script: imports the service entry point and SERVICE's module, then prints JSON with the
seconds it took, the process's RSS and the top-level modules it loaded."""
import importlib
import json
import subprocess
import sys
import time

ENTRY = "theval_mesh.rpc.main"


def module_of(service: str) -> str:
    from theval_mesh.rpc.main import SERVICE_MODULES
    return SERVICE_MODULES[service]


def measure(service: str | None) -> dict:
    """In a fresh interpreter (service None: the bare interpreter, the baseline)."""
    out = subprocess.run([sys.executable, __file__] + ([service] if service else []), capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def _main(service: str | None):
    before = set(sys.modules)
    start = time.perf_counter()
    if service:
        importlib.import_module(ENTRY)
        importlib.import_module(module_of(service))
    seconds = time.perf_counter() - start
    rss_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS"))
    loaded = sorted({m.split(".")[0] for m in set(sys.modules) - before})
    print(json.dumps({"seconds": seconds, "rss_mb": rss_kb / 1024, "modules": loaded}))


if __name__ == "__main__":
    _main(sys.argv[1] if len(sys.argv) > 1 else None)
