"""The weights store and `theval weights`: status, verify, fetch (never over the network here)."""
import argparse
import hashlib
import inspect

import pytest

from theval_mesh.backends.weights import store as ws
from theval_mesh.backends.weights.registry import HEADPOSE_MODELS, MODELS, QualityModel, WeightFile
from theval_mesh.commands import weights as weights_command
from theval_mesh.pure.errors import UserError

ALL_FILES = [f.name for m in [*MODELS.values(), *HEADPOSE_MODELS.values()] for f in m.files]


def run_cli(argv):
    parser = argparse.ArgumentParser(prog="theval")
    weights_command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def fill(store, names=ALL_FILES, content=b"not the published weights"):
    store.mkdir(parents=True, exist_ok=True)
    for name in names:
        (store / name).write_bytes(content + name.encode())


def by_file(rows):
    return {r.file: r for r in rows}


def test_registry_matches_installed_pyiqa_and_facexlib():
    import facexlib.detection
    import facexlib.parsing
    from pyiqa.archs import musiq_arch, topiq_arch, topiq_swin
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    def url_of(model, where):
        return next(f.url for f in MODELS[model].files if f.where == where)

    assert url_of("topiq_iaa", "main") == topiq_arch.default_model_urls["cfanet_iaa_ava_swin"]
    assert url_of("topiq_iaa", "torch_hub") == \
        topiq_swin.default_cfgs["swin_base_patch4_window12_384"]["url"]
    # pyiqa 0.1.13's topiq_nr-face checkpoint (GFIQA), which 0.1.16's table still holds
    # (test_quality_gfiqa.py checks it against 0.1.13's own values)
    assert url_of("topiq_nr-face", "main") == topiq_arch.default_model_urls["topiq_nr_gfiqa_res50"]
    assert url_of("musiq", "main") == musiq_arch.default_model_urls["koniq10k"]
    assert url_of("musiq-spaq", "main") == musiq_arch.default_model_urls["spaq"]
    # the metric names map to those checkpoints in pyiqa's own configs
    assert DEFAULT_CONFIGS["topiq_iaa"]["metric_opts"]["model_name"] == "cfanet_iaa_ava_swin"
    # ... except topiq_nr-face: 0.1.16's config names CGFIQA, so the registry passes 0.1.13's
    # options, GFIQA's model_name among them, to create_metric
    assert DEFAULT_CONFIGS["topiq_nr-face"]["metric_opts"]["model_name"] == "topiq_nr_cgfiqa_res50"
    assert MODELS["topiq_nr-face"].create_kwargs["model_name"] == "topiq_nr_gfiqa_res50"
    assert DEFAULT_CONFIGS["musiq"]["metric_opts"]["pretrained"] == "koniq10k"
    assert DEFAULT_CONFIGS["musiq-spaq"]["metric_opts"]["pretrained"] == "spaq"
    # facexlib keeps its URLs inside the init functions
    assert url_of("topiq_nr-face", "facexlib") in inspect.getsource(facexlib.detection)
    parser = next(f for f in MODELS["topiq_nr-face"].files if f.name == "parsing_parsenet.pth")
    assert parser.url in inspect.getsource(facexlib.parsing)
    # the published prefix is the hex in the file name
    for m in MODELS.values():
        assert m.main.name.endswith(f"-{m.main.sha256_prefix}.pth")


def test_default_store_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("THEVAL_WEIGHTS", str(tmp_path / "w"))
    assert ws.default_store() == tmp_path / "w"
    monkeypatch.delenv("THEVAL_WEIGHTS")
    assert ws.default_store().parts[-3:] == (".cache", "theval", "weights")


def test_status_lists_every_file_with_path_and_checksum(tmp_path):
    rows = ws.status(tmp_path / "empty")
    assert [r.file for r in rows] == ALL_FILES
    assert not any(r.present for r in rows) and {r.state for r in rows} == {"missing"}
    fill(tmp_path / "s", ["musiq_koniq_ckpt-e95806b9.pth"])
    row = by_file(ws.status(tmp_path / "s", ["musiq"]))["musiq_koniq_ckpt-e95806b9.pth"]
    assert row.present and row.path == str(tmp_path / "s" / row.file)
    assert row.sha256 == hashlib.sha256((tmp_path / "s" / row.file).read_bytes()).hexdigest()
    missing = ws.missing_files(tmp_path / "s", ["musiq", "musiq-spaq"])
    assert missing == ["musiq_spaq_ckpt-358bb6af.pth"]


def test_verify_flags_files_that_are_not_the_published_ones(tmp_path):
    fill(tmp_path)
    rows = by_file(ws.verify(tmp_path))
    main = rows["cfanet_iaa_ava_swin-393b41b4.pth"]
    assert main.state == "mismatch" and "393b41b4" in main.detail
    # no checksum was ever published for the Swin and facexlib files
    assert rows["detection_Resnet50_Final.pth"].state == "unverified"
    (tmp_path / "parsing_parsenet.pth").unlink()
    assert by_file(ws.verify(tmp_path))["parsing_parsenet.pth"].state == "missing"


@pytest.fixture
def local_model(monkeypatch, tmp_path):
    """A registry entry served from file:// URLs, so fetch runs without a network."""
    src = tmp_path / "published"
    src.mkdir()
    (src / "tiny-aaaa.pth").write_bytes(b"main weights")
    (src / "side.pth").write_bytes(b"side file")
    prefix = hashlib.sha256(b"main weights").hexdigest()[:8]
    main = WeightFile(f"tiny-{prefix}.pth", (src / "tiny-aaaa.pth").as_uri(), prefix, "main")
    side = WeightFile("side.pth", (src / "side.pth").as_uri(), None, "facexlib")
    monkeypatch.setitem(MODELS, "tiny", QualityModel("tiny", (main, side), weight_key=None))
    return main, side


def test_fetch_downloads_records_checksums_and_verify_catches_corruption(tmp_path, local_model,
                                                                         capsys):
    main, side = local_model
    store = tmp_path / "store"
    rows = by_file(ws.fetch(store, ["tiny"]))
    assert rows[main.name].state == "ok" and rows[side.name].state == "ok"  # side: SHA256SUMS
    assert ws.read_manifest(store)[side.name] == hashlib.sha256(b"side file").hexdigest()
    assert run_cli(["weights", "verify", "--store", str(store), "--model", "tiny"]) == 0

    (store / side.name).write_bytes(b"side file, truncated")  # corrupted after the download
    row = by_file(ws.verify(store, ["tiny"]))[side.name]
    assert row.state == "mismatch" and ws.MANIFEST in row.detail
    capsys.readouterr()
    assert run_cli(["weights", "verify", "--store", str(store), "--model", "tiny"]) == 1
    out = capsys.readouterr().out
    assert "mismatch" in out and side.name in out.splitlines()[-1]


def test_fetch_refuses_a_download_with_the_wrong_checksum(tmp_path, local_model, monkeypatch):
    main, side = local_model
    bad = WeightFile(main.name, side.url, main.sha256_prefix, "main")  # serves the wrong bytes
    monkeypatch.setitem(MODELS, "tiny", QualityModel("tiny", (bad,), weight_key=None))
    with pytest.raises(UserError, match=main.sha256_prefix):
        ws.fetch(tmp_path / "store", ["tiny"])
    assert list((tmp_path / "store").iterdir()) == []  # nothing half-written is left


def test_fetch_offline_fails_with_one_clear_line(tmp_path, no_network):
    store = tmp_path / "store"
    with pytest.raises(UserError) as err:
        ws.fetch(store, ["musiq", "topiq_nr-face"])
    msg = str(err.value)
    assert len(msg.splitlines()) == 1 and no_network  # it tried, and was stopped at the socket
    assert MODELS["musiq"].main.url in msg and str(store) in msg
    assert "theval weights fetch" in msg
    for name in ("musiq_koniq_ckpt-e95806b9.pth", "topiq_nr_gfiqa_res50-d76bf1ae.pth",
                 "detection_Resnet50_Final.pth", "parsing_parsenet.pth"):
        assert name in msg


def test_cli_fetch_offline_exits_nonzero_without_traceback(tmp_path, no_network, monkeypatch,
                                                           capsys):
    from theval_mesh.commands import cli
    from theval_mesh.pure.exit_codes import EXIT_ERROR
    monkeypatch.setattr(cli, "COMMANDS", ("weights",))  # the other commands are not ours
    code = cli.main(["weights", "fetch", "--store", str(tmp_path), "--model", "musiq"])
    err = capsys.readouterr().err
    assert code == EXIT_ERROR
    assert err.startswith("error: cannot download ") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_cli_status_prints_the_table(tmp_path, capsys):
    fill(tmp_path, ["musiq_koniq_ckpt-e95806b9.pth"])
    assert run_cli(["weights", "status", "--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("model"))
    assert header.split() == ["model", "file", "path", "present", "sha256"]
    sha = ws.sha256_file(tmp_path / "musiq_koniq_ckpt-e95806b9.pth")
    assert sha[:12] in out
    assert f"missing: download {MODELS['musiq-spaq'].main.url}" in out  # where to get the rest
    # verify of an incomplete store fails, unless missing files are allowed (an init container
    # in quality 'auto'); a file that does not match fails either way
    assert run_cli(["weights", "verify", "--store", str(tmp_path)]) == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_cli(["weights", "verify", "--store", str(empty), "--allow-missing"]) == 0
    (empty / "musiq_koniq_ckpt-e95806b9.pth").write_bytes(b"not the checkpoint")
    assert run_cli(["weights", "verify", "--store", str(empty), "--allow-missing"]) == 1


def test_cli_rejects_unknown_models(tmp_path):
    with pytest.raises(SystemExit):
        run_cli(["weights", "status", "--store", str(tmp_path), "--model", "nima"])


def test_verify_never_accepts_stand_in_weights(fake_store, headpose_store, capsys):
    for store, models in ((fake_store, ["topiq_iaa", "musiq", "topiq_nr-face"]),
                          (headpose_store, ["facexformer"])):
        rows = ws.verify(store, models)
        assert rows and {r.state for r in rows} == {"stand-in"}
        assert all(r.stand_in_seed == 0 and "not the published file" in r.detail for r in rows)
        assert run_cli(["weights", "verify", "--store", str(store),
                        *[a for m in models for a in ("--model", m)]]) == 1
        assert "stand-in" in capsys.readouterr().out
