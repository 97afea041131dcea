"""Every run setting of the table in pure.settings reaches every surface generated from it: the
scoring commands' flags, the servers' flags and THEVAL_* variables, the stored key and the proto."""
import dataclasses

import pytest

from theval_mesh.commands.cli import build_parser
from theval_mesh.commands.evaluate import settings_from
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.settings import LIMIT_SETTINGS, SETTINGS, RunSettings
from theval_mesh.rpc import config, wire
from theval_mesh.rpc.v1 import common_pb2

# How each scoring command is called with nothing but its required arguments.
SCORING_COMMANDS = (["evaluate", "--gt", "gt", "--out", "out"], ["bulk", "submit", "--gt", "gt"], ["demo"])


def other(s):
    """A valid value of setting `s` that is not its default."""
    if s.kind is bool:
        return not s.default
    if s.choices:
        return next(c for c in s.choices if c != s.default)
    return s.kind(s.default * 2 + 1)


def argv(s, value) -> list[str]:
    return [s.flag] if s.kind is bool else [s.flag, str(value)]


def env_text(s, value) -> str:
    return ("1" if value else "0") if s.kind is bool else str(value)


def value_of(run: RunSettings, s):
    return getattr(run.limits if s in LIMIT_SETTINGS else run, s.name)


OTHERS = RunSettings(**{s.name: other(s) for s in SETTINGS})


def test_the_table_is_every_field_of_run_settings_and_of_the_proto():
    names = [s.name for s in SETTINGS]
    assert names == [f.name for f in dataclasses.fields(RunSettings) if f.name != "limits"]
    assert set(names) == set(common_pb2.RunSettings.DESCRIPTOR.fields_by_name) == set(RunSettings().key())
    assert [s.name for s in LIMIT_SETTINGS] == ["max_side_px", "max_duration_s"]
    assert {s.env for s in SETTINGS + LIMIT_SETTINGS} == {
        "THEVAL_PROFILE", "THEVAL_QUALITY", "THEVAL_HEADPOSE", "THEVAL_FRAME_STRIDE", "THEVAL_SINGLE_PASS",
        "THEVAL_NORMALISE_TRANSLATION", "THEVAL_MAX_SIDE_PX", "THEVAL_MAX_DURATION_S"}
    assert RunSettings() == RunSettings(**{s.name: s.default for s in SETTINGS})


@pytest.mark.parametrize("command", SCORING_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_every_setting_is_a_flag_of_every_scoring_command(command):
    parser = build_parser(command[0])
    assert settings_from(parser.parse_args(command)) == RunSettings()
    given = parser.parse_args(command + [a for s in SETTINGS for a in argv(s, other(s))])
    assert settings_from(given) == OTHERS


def test_a_bad_flag_value_is_a_user_error():
    args = build_parser("evaluate").parse_args(SCORING_COMMANDS[0] + ["--frame-stride", "0"])
    with pytest.raises(UserError, match="frame stride must be >= 1"):
        settings_from(args)


@pytest.fixture
def evaluator_env(tmp_path):
    return {"THEVAL_PORT": "0", "THEVAL_METRICS_PORT": "0", "THEVAL_ALLOWED_ROOTS": str(tmp_path),
            "THEVAL_STORE": str(tmp_path / "s.sqlite"),
            **{f"THEVAL_{d.upper()}_ADDR": f"127.0.0.1:{5000 + i}" for i, d in enumerate(config.DEPENDENCIES)}}


def serve(argv_, env):
    args = build_parser("serve").parse_args(["serve", "evaluator", *argv_])
    return config.load("evaluator", args, env)


@pytest.mark.parametrize("s", SETTINGS + LIMIT_SETTINGS, ids=lambda s: s.name)
def test_every_setting_is_a_flag_and_a_variable_of_the_evaluator(s, evaluator_env):
    assert getattr(build_parser("serve").parse_args(["serve", "evaluator"]), s.name) is None  # load() tells
    assert value_of(serve([], evaluator_env).run, s) == s.default
    from_env = serve([], evaluator_env | {s.env: env_text(s, other(s))})
    assert value_of(from_env.run, s) == other(s) and from_env.limits == from_env.run.limits
    flagged = serve(argv(s, other(s)), evaluator_env | {s.env: env_text(s, s.default)})
    assert value_of(flagged.run, s) == other(s)  # a flag wins over its variable


def test_bad_variables_of_settings_name_the_variable(evaluator_env):
    for s in SETTINGS + LIMIT_SETTINGS:
        if s.kind is not str:
            with pytest.raises(UserError, match=f"{s.env}='x'"):
                serve([], evaluator_env | {s.env: "x"})
        if s.choices:
            with pytest.raises(UserError, match=f"{s.env}='x': use one of"):
                serve([], evaluator_env | {s.env: "x"})


def test_every_setting_crosses_the_proto_and_unset_fields_are_the_default():
    back = common_pb2.RunSettings.FromString(wire.settings_to_proto(OTHERS).SerializeToString())
    assert wire.settings_from_proto(back, RunSettings(), OTHERS.limits) == OTHERS
    # "Empty strings and 0 mean the default" (common.proto), for every setting.
    assert wire.settings_from_proto(common_pb2.RunSettings(), OTHERS, OTHERS.limits) == OTHERS
    assert wire.settings_from_proto(wire.settings_to_proto(RunSettings()), RunSettings(), OTHERS.limits) == \
        RunSettings()


def test_keys_round_trip_and_old_keys_still_load():
    assert RunSettings.from_key(OTHERS.key()) == OTHERS
    old = RunSettings(single_pass=True).key()
    old["exact_reference"] = not old.pop("single_pass")
    assert RunSettings.from_key(old) == RunSettings(single_pass=True)
