"""One settings object from flags and THEVAL_* variables, checked at start-up."""
import argparse

import pytest

from theval_mesh.pure.errors import UserError
from theval_mesh.rpc import config


def parse(service, argv):
    p = argparse.ArgumentParser()
    config.add_options(p, [service])
    return p.parse_args(argv)


def test_flags_win_over_the_environment_which_wins_over_defaults(tmp_path):
    env = {"THEVAL_PORT": "7000", "THEVAL_METRICS_PORT": "7001", "THEVAL_ALLOWED_ROOTS": str(tmp_path),
           "THEVAL_WORKERS": "3", "THEVAL_QUALITY": "proxy"}
    c = config.load("quality", parse("quality", ["--port", "8000"]), env)
    assert (c.port, c.metrics_port, c.workers, c.run.quality) == (8000, 7001, 3, "proxy")
    assert c.allowed_roots == (str(tmp_path.resolve()),)
    assert c.max_video_bytes == 64 * config.MIB and c.run.profile == "reference"


def test_the_evaluator_needs_its_store_roots_and_dependencies(tmp_path):
    env = {"THEVAL_PORT": "0", "THEVAL_METRICS_PORT": "0", "THEVAL_ALLOWED_ROOTS": str(tmp_path)}
    with pytest.raises(UserError, match=r"missing required setting --store \(or THEVAL_STORE\)"):
        config.load("evaluator", parse("evaluator", []), env)
    env["THEVAL_STORE"] = str(tmp_path / "s.sqlite")
    with pytest.raises(UserError, match="--landmarks-addr"):
        config.load("evaluator", parse("evaluator", []), env)
    env.update({f"THEVAL_{d.upper()}_ADDR": f"127.0.0.1:{5000 + i}" for i, d in enumerate(config.DEPENDENCIES)})
    c = config.load("evaluator", parse("evaluator", ["--retries", "0", "--single-pass"]), env)
    assert c.dependencies["audio"] == "127.0.0.1:5003" and c.retries == 0 and c.run.single_pass


@pytest.mark.parametrize("argv, env, message", [
    (["--port", "-1"], {}, "must be a port number"),
    ([], {"THEVAL_WORKERS": "0"}, "THEVAL_WORKERS=0: must be at least 1"),
    ([], {"THEVAL_GRACE_S": "soon"}, "is not a valid float"),
    ([], {"THEVAL_ALLOWED_ROOTS": "/no/such/folder"}, "is not an existing folder"),
    (["--max-video-bytes", str(2 << 30)], {}, "at least 1 MiB under"),
    ([], {"THEVAL_PROFILE": "fancy"}, "use one of"),
])
def test_bad_values_are_refused_naming_the_setting(argv, env, message, tmp_path):
    env = {"THEVAL_PORT": "1", "THEVAL_METRICS_PORT": "2", "THEVAL_ALLOWED_ROOTS": str(tmp_path)} | env
    with pytest.raises(UserError, match=message):
        config.load("quality", parse("quality", argv), env)


def test_services_take_only_their_options():
    headpose = parse("headpose", ["--port", "1", "--metrics-port", "2"])
    assert not hasattr(headpose, "store") and not hasattr(headpose, "quality")
    # a rigid-fit head-pose service reads no video: its roots are optional (FaceXFormer reads them)
    loaded = config.load("headpose", headpose, {})
    assert loaded.allowed_roots == () and loaded.run.headpose == "auto"
    assert hasattr(headpose, "weights_store") and hasattr(headpose, "max_side_px")


def test_stream_limits_default_to_half_the_workers_and_stay_within_them(tmp_path):
    env = {"THEVAL_PORT": "0", "THEVAL_METRICS_PORT": "0", "THEVAL_ALLOWED_ROOTS": str(tmp_path),
           "THEVAL_STORE": str(tmp_path / "s.sqlite"),
           **{f"THEVAL_{d.upper()}_ADDR": f"127.0.0.1:{5000 + i}" for i, d in enumerate(config.DEPENDENCIES)}}
    c = config.load("evaluator", parse("evaluator", ["--workers", "6"]), env)
    assert (c.streams, c.stream_idle_s, c.stream_max_s) == (3, 60.0, 3600.0)
    assert config.load("evaluator", parse("evaluator", ["--stream-limit", "1"]), env).streams == 1
    with pytest.raises(UserError, match=r"THEVAL_STREAM_LIMIT=7: must be 1 to --workers \(6\)"):
        config.load("evaluator", parse("evaluator", ["--workers", "6"]), env | {"THEVAL_STREAM_LIMIT": "7"})
    with pytest.raises(UserError, match="--stream-idle-s=0.0: must be more than 0"):
        config.load("evaluator", parse("evaluator", ["--stream-idle-s", "0"]), env)
    # one caller (a token's identity) holds half the streams by default, at least 1
    assert (c.caller_streams, config.load("evaluator", parse("evaluator", ["--workers", "2"]), env).caller_streams) \
        == (1, 1)
    assert config.load("evaluator", parse("evaluator", []), env).caller_streams == 2  # of 4 streams
    assert config.load("evaluator", parse("evaluator", ["--stream-limit-per-caller", "4"]), env).caller_streams == 4
    with pytest.raises(UserError, match=r"THEVAL_STREAM_LIMIT_PER_CALLER=4: must be 1 to the stream limit \(3\)"):
        config.load("evaluator", parse("evaluator", ["--workers", "6"]), env | {"THEVAL_STREAM_LIMIT_PER_CALLER": "4"})
