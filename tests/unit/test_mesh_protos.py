"""The generated gRPC code is in sync with protos/theval/v1/*.proto."""
import importlib.util
from pathlib import Path

import pytest

from theval_mesh.pure.services import SERVICES

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("generate_protos", ROOT / "protos" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_code_is_current():
    pytest.importorskip("grpc_tools", reason="grpcio-tools comes with the test extra: ./dev setup")
    gen = _generator()
    stale = gen.stale(gen.generate())
    assert stale == [], (f"generated code in {gen.OUT_DIR} is stale ({', '.join(stale)}): "
                         "run `python protos/generate.py`")


def test_one_proto_per_service_plus_common():
    names = sorted(p.name for p in (ROOT / "protos" / "theval" / "v1").glob("*.proto"))
    assert names == sorted(f"{s}.proto" for s in SERVICES + ("common",))  # the services of pure/services.py


def test_generated_modules_import_inside_the_package():
    from theval_mesh.rpc.v1 import evaluator_pb2, evaluator_pb2_grpc  # noqa: F401
    assert evaluator_pb2.DESCRIPTOR.name == "theval/v1/evaluator.proto"
    assert evaluator_pb2.DESCRIPTOR.package == "theval.v1"
