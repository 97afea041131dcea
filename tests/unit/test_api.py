"""The public Python API's fast parts: version, lazy imports, leaderboard rows and DataFrames,
arguments, and the evaluator's status codes as exceptions (a real gRPC server on loopback)."""
import math
import subprocess
import sys
from concurrent import futures

import grpc
import pytest

import theval_mesh
from theval_mesh.pure.errors import (
    AccessDenied,
    AlreadyExists,
    InputTooLarge,
    NotFound,
    Overloaded,
    ServiceError,
    UserError,
)
from theval_mesh.pure.version import VERSION

HEAVY = ("torch", "ray", "grpc", "av", "mediapipe", "pandas", "numpy")


def imported_after(code: str) -> list[str]:
    """The HEAVY modules a fresh interpreter holds after running `code`."""
    probe = f"import sys\n{code}\nprint('loaded:', *(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()[-1].split()[1:]


def test_version_is_the_tools_and_the_cli_prints_it(capsys):
    from theval_mesh.commands.cli import main
    assert theval_mesh.__version__ == VERSION and VERSION
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"theval {VERSION}\n"


def test_importing_the_package_or_asking_the_version_loads_nothing_heavy():
    assert imported_after("import theval_mesh; theval_mesh.__version__") == []
    # a service image has only its own dependencies: --version must not load every command
    assert imported_after("from theval_mesh.commands.cli import main\n"
                          "try:\n    main(['--version'])\nexcept SystemExit:\n    pass") == []


def test_a_pipeline_importing_the_client_loads_no_models():
    client = imported_after("from theval_mesh import Client")
    assert "grpc" in client and "torch" not in client and "ray" not in client


def test_public_names_resolve_to_the_api_and_unknown_ones_fail():
    from theval_mesh.api import client, evaluation, scorer
    assert theval_mesh.evaluate is evaluation.evaluate and theval_mesh.Scorer is scorer.Scorer
    assert theval_mesh.Client is client.Client
    assert {"evaluate", "Scorer", "Client", "__version__"} <= set(dir(theval_mesh)) & set(theval_mesh.__all__)
    with pytest.raises(AttributeError, match="no_such_name"):
        theval_mesh.no_such_name  # noqa: B018 - the attribute's lookup is what must fail


def test_the_classic_metrics_answer_to_their_earlier_names_too():
    from theval_mesh.api import classic
    assert theval_mesh.legacy is classic.classic and theval_mesh.LegacyRun is classic.ClassicRun
    assert theval_mesh.LegacyRow is classic.ClassicRow and "legacy" not in theval_mesh.__all__


# ---------------------------------------------------------------------- results and leaderboard
def _evaluation():
    """An Evaluation of a GT video and two model videos (one failed), from hand-made raw values."""
    from theval_mesh.api.evaluation import Evaluation, _rows
    from theval_mesh.core import aggregate
    from theval_mesh.core.results import FAILED, OK, VideoResult
    from theval_mesh.pure.scoring.names import KEYS

    gt = VideoResult("GT", "gt/a.mp4", OK, metrics={k: 1.0 + i for i, k in enumerate(KEYS)}, frames_total=50)
    model = VideoResult("m", "m/a.mp4", OK, metrics={k: 2.0 + 2 * i for i, k in enumerate(KEYS)}, frames_total=40)
    model.metrics["lip_sync"] = math.nan
    bad = VideoResult("m", "m/b.mp4", FAILED, "not a readable video")
    results = [gt, model, bad]
    rows = aggregate.model_rows(results, ["GT", "m"])
    board = aggregate.ranked(results, ["GT", "m"], "GT", weights={"Lip sync": 0}, rows=rows)  # m: no lip-sync value
    return Evaluation(results=results, leaderboard=_rows(board, rows), board=board, paths={})


def test_leaderboard_rows_hold_raw_normalised_group_and_final_scores():
    gt_row, m = _evaluation().leaderboard
    assert gt_row.is_gt and gt_row.rank is None and gt_row.final == 1.0
    assert (m.model, m.rank, m.is_gt) == ("m", 1, False)
    assert m.raw["Global aesthetic"] == 2.0 and m.raw["Lip dynamics"] == 8.0 and math.isnan(m.raw["Lip sync"])
    assert m.normalised["Global aesthetic"] == 0.0  # 1 - |2 - 1| / 1
    assert m.normalised["Lip dynamics"] == pytest.approx(1 - 4 / 4)
    assert m.counts["Global aesthetic"] == 1 and m.counts["Lip sync"] == 0  # the failed video counts nowhere
    assert m.groups["Quality"] == pytest.approx(sum(m.normalised[k] for k in
                                                    ("Global aesthetic", "Mouth quality", "Face quality")) / 3)
    seven = [v for k, v in m.normalised.items() if k != "Lip sync"]
    assert m.final == pytest.approx(sum(seven) / 7) and "Lip sync" in m.note
    # intervals: one video a side, whose every resample is that video: no interval (n=1), not one of width 0
    assert gt_row.final_ci is None and gt_row.raw_ci == {}
    assert m.final_ci is None and m.groups_ci == m.normalised_ci == m.raw_ci == {}


def test_to_pandas_gives_one_row_per_video_and_per_model():
    evaluation = _evaluation()
    results, board = evaluation.to_pandas()
    assert list(results["video"]) == ["gt/a.mp4", "m/a.mp4", "m/b.mp4"]
    assert results.loc[1, "lip_dynamics"] == 8.0 and math.isnan(results.loc[1, "lip_sync"])
    assert results.loc[2, "status"] == "failed" and results.loc[2, "reason"] == "not a readable video"
    assert list(results["frames_total"]) == [50, 40, 0]
    assert list(board.index) == ["GT", "m"] and board.index.name == "Model"
    assert board.loc["m", "Rank"] == 1 and board["Rank"].isna().tolist() == [True, False]
    m = evaluation.leaderboard[1]
    assert board.loc["m", "Final score"] == m.final and board.loc["m", "Naturalness"] == m.groups["Naturalness"]
    assert board.loc["m", "Lip dynamics"] == m.normalised["Lip dynamics"]
    assert board.loc["m", "raw:Lip dynamics"] == 8.0 and board.loc["m", "n:Lip sync"] == 0
    assert board.loc["GT", "Note"] == "ground truth"
    # one video each: no interval (n=1), so the interval columns are empty
    assert math.isnan(board.loc["m", "ci_low:Final score"]) and math.isnan(board.loc["m", "ci_high:Quality"])
    assert math.isnan(board.loc["GT", "ci_low:Final score"])


def test_to_pandas_without_pandas_says_how_to_install_it(monkeypatch):
    evaluation = _evaluation()
    monkeypatch.setitem(sys.modules, "pandas", None)  # what `import pandas` meets when it is not installed
    with pytest.raises(ImportError, match="pip install pandas"):
        evaluation.to_pandas()


# ---------------------------------------------------------------------- arguments
def test_run_settings_from_keywords_or_an_object_not_both():
    from theval_mesh.api.arguments import model_pairs, run_settings
    from theval_mesh.pure.settings import RunSettings
    assert run_settings(None, {"profile": "paper", "quality": "proxy"}) == RunSettings(profile="paper",
                                                                                        quality="proxy")
    given = RunSettings(single_pass=True)
    assert run_settings(given, {}) is given
    with pytest.raises(TypeError, match="not both"):
        run_settings(given, {"quality": "proxy"})
    with pytest.raises(UserError, match="quality"):
        run_settings(None, {"quality": "best"})
    with pytest.raises(TypeError):
        run_settings(None, {"qualty": "proxy"})
    assert model_pairs({"a": "x"}) == model_pairs([("a", "x")]) == [("a", "x")]


def test_evaluate_refuses_zero_workers_before_scoring(tmp_path):
    from theval_mesh import evaluate
    with pytest.raises(UserError, match="workers"):
        evaluate(tmp_path, {}, workers=0)
    assert list(tmp_path.iterdir()) == []


def test_the_bytes_limit_is_the_evaluators(monkeypatch):
    from theval_mesh.api.scorer import bytes_limit
    from theval_mesh.rpc.config import Config
    monkeypatch.delenv("THEVAL_MAX_VIDEO_BYTES", raising=False)
    assert bytes_limit() == Config.max_video_bytes == 64 << 20
    monkeypatch.setenv("THEVAL_MAX_VIDEO_BYTES", "1000")
    assert bytes_limit() == 1000
    monkeypatch.setenv("THEVAL_MAX_VIDEO_BYTES", "lots")
    with pytest.raises(UserError, match="THEVAL_MAX_VIDEO_BYTES"):
        bytes_limit()


# ---------------------------------------------------------------------- status codes as exceptions
@pytest.fixture(scope="module")
def refusing_server():
    """A real gRPC server whose one method aborts with the code (and trailer) the request names."""
    from theval_mesh.rpc.protocol import BUSY

    def refuse(request: bytes, context):
        code, _, busy = request.decode().partition("+")
        if busy:
            context.set_trailing_metadata(((BUSY, "1"),))
        context.abort(grpc.StatusCode[code], f"the server's own words for {code}")

    handler = grpc.method_handlers_generic_handler("test.Refuser", {"Refuse": grpc.unary_unary_rpc_method_handler(
        refuse, request_deserializer=None, response_serializer=None)})
    server = grpc.server(futures.ThreadPoolExecutor(2), handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield channel.unary_unary("/test.Refuser/Refuse")
    channel.close()
    server.stop(None)


@pytest.mark.parametrize("code, video, kind", [
    ("INVALID_ARGUMENT", None, UserError),
    ("FAILED_PRECONDITION", None, UserError),
    ("PERMISSION_DENIED", None, AccessDenied),
    ("NOT_FOUND", None, NotFound),
    ("ALREADY_EXISTS", None, AlreadyExists),
    ("RESOURCE_EXHAUSTED", "clip.mp4", InputTooLarge),
    ("RESOURCE_EXHAUSTED", None, Overloaded),
    ("RESOURCE_EXHAUSTED+busy", "clip.mp4", Overloaded),
    ("UNAVAILABLE", None, ServiceError),
    ("INTERNAL", None, ServiceError),
    ("UNAUTHENTICATED", None, UserError),
])
def test_status_codes_become_the_projects_exceptions_with_the_detail(refusing_server, code, video, kind):
    from theval_mesh.api.errors import error_from_rpc
    with pytest.raises(grpc.RpcError) as raised:
        refusing_server(code.encode(), timeout=10)
    err = error_from_rpc(raised.value, "127.0.0.1:1", video)
    assert type(err) is kind, err
    plain = code.partition("+")[0]
    assert f"the server's own words for {plain}" in str(err)
    if kind is ServiceError:
        assert err.code == plain and "127.0.0.1:1" in str(err)
    if kind is InputTooLarge:
        assert err.path == "clip.mp4"
    if plain == "UNAUTHENTICATED":
        assert "token" in str(err)


def test_a_client_without_a_server_fails_with_unavailable_and_a_bad_address_at_once(tmp_path):
    from theval_mesh import Client
    from theval_mesh.rpc.launcher import free_port
    with pytest.raises(UserError, match="HOST:PORT"):
        Client("localhost")
    with Client(f"127.0.0.1:{free_port()}", timeout_s=10) as client:
        with pytest.raises(ServiceError) as raised:
            client.status("job-1")
    assert raised.value.code == "UNAVAILABLE"
