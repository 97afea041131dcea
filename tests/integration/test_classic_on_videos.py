"""`theval classic` on real videos of the synthetic face (synth's renderer, H.264 files) through
real MediaPipe: identity, noise, a shifted face, a frozen mouth, pairing and failures by name,
absent network weights. About 10 s (256 px, 20 frames, 5 models)."""
import csv
import math
import shutil

import numpy as np
import pytest

from tests.support.video_files import gradient, write_video
from theval_mesh.commands.cli import main as cli
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.metrics import classic as lm
from theval_mesh.studies import classic_metrics
from theval_mesh.synth import motion
from theval_mesh.synth.face_geometry import face_geometry
from theval_mesh.synth.face_warp import FaceRenderer
from theval_mesh.synth.mp4 import write_mp4

pytestmark = pytest.mark.slow

SIZE, FRAMES, FPS = 256, 20, 25
def _frames(mouth, tx=0.0, post=None, n=FRAMES):
    geo = face_geometry(SIZE)
    renderer = FaceRenderer(geo, max_open=motion.FACE_MOUTH_MAX * geo.face_width, max_brow=1.0)
    frames = [renderer.render(mouth[t], 0.0, 0.0, tx, 0.0) for t in range(n)]
    return [post(f) for f in frames] if post else frames


def _noise(sigma, seed):
    rng = np.random.default_rng(seed)
    return lambda f: np.clip(f + rng.normal(0, sigma, f.shape), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    """gt/clip_a.mp4 (the mouth opens and closes) and generated folders, one model each."""
    root = tmp_path_factory.mktemp("classic")
    open_px = motion.FACE_MOUTH_MAX * face_geometry(SIZE).face_width
    mouth = open_px * 0.5 * (1 - np.cos(2 * np.pi * np.arange(FRAMES) / 10))
    write_mp4(root / "gt" / "clip_a.mp4", _frames(mouth), FPS)
    write_mp4(root / "gt" / "clip_b.mp4", _frames(mouth), FPS)
    write_mp4(root / "gt" / "clip_c.mp4", _frames(mouth), FPS)
    (root / "same").mkdir()
    shutil.copy(root / "gt" / "clip_a.mp4", root / "same" / "clip_a.mp4")
    write_mp4(root / "noise_low" / "clip_a.mp4", _frames(mouth, post=_noise(6, 0)), FPS)
    write_mp4(root / "noise_high" / "clip_a.mp4", _frames(mouth, post=_noise(25, 0)), FPS)
    write_mp4(root / "shifted" / "clip_a.mp4", _frames(mouth, tx=8.0, n=16), FPS)  # shorter, too
    write_mp4(root / "frozen" / "clip_a.mp4", _frames(np.zeros(FRAMES)), FPS)
    broken = root / "broken"
    broken.mkdir()
    shutil.copy(root / "gt" / "clip_a.mp4", broken / "clip_a.mp4")
    shutil.copy(root / "gt" / "clip_a.mp4", broken / "orphan.mp4")  # no GT of that name
    (broken / "clip_b.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 8)  # corrupt
    write_video(broken / "clip_c.mp4", gradient(FRAMES, 64, 64), FPS)  # no face
    return root


@pytest.fixture(scope="module")
def scored(videos, tmp_path_factory):
    store = tmp_path_factory.mktemp("empty-store")
    models = classic_metrics.generated_models([str(videos / m) for m in
                                      ("same", "noise_low", "noise_high", "shifted", "frozen")])
    result = classic_metrics.run(models, videos / "gt", store=store, progress=False)
    return {r.model: r for r in result.rows}, result


def test_a_video_against_itself(scored):
    row = scored[0]["same"]
    assert row.status == "ok" and row.gt_video.endswith("clip_a.mp4")
    assert (row.lmd_f, row.lmd_m, row.psnr, row.ssim) == (0.0, 0.0, 100.0, 1.0)
    assert (row.frames_paired, row.frames_skipped) == (FRAMES, 0)


def test_more_noise_lower_psnr_and_ssim(scored):
    low, high = scored[0]["noise_low"], scored[0]["noise_high"]
    print(f"noise 6: PSNR {low.psnr:.2f} SSIM {low.ssim:.4f} LMD-F {low.lmd_f:.3f}; "
          f"noise 25: PSNR {high.psnr:.2f} SSIM {high.ssim:.4f} LMD-F {high.lmd_f:.3f}")
    assert 100 > low.psnr > high.psnr and 1 > low.ssim > high.ssim


def test_a_shifted_face_has_a_larger_lmd_f(scored):
    shifted, unshifted = scored[0]["shifted"], scored[0]["noise_low"]
    print(f"shifted 8 px at {SIZE}: LMD-F {shifted.lmd_f:.3f} LMD-M {shifted.lmd_m:.3f}")
    assert shifted.frames_paired == 16  # paired up to the shorter video
    assert shifted.lmd_f > 4 * unshifted.lmd_f
    assert shifted.lmd_f == pytest.approx(8 * 256 / SIZE, rel=0.25)  # in 256-scale px


def test_a_frozen_mouth_moves_lmd_m_more_than_lmd_f(scored):
    frozen, shifted, noisy = (scored[0][m] for m in ("frozen", "shifted", "noise_low"))
    print(f"frozen mouth: LMD-F {frozen.lmd_f:.3f} LMD-M {frozen.lmd_m:.3f}; noisy copy LMD-M {noisy.lmd_m:.3f}")
    # per point, the mouth's difference shows in LMD-M more than in LMD-F (the jaw moves too, so
    # not by all of 478/40), where a whole-face shift moves both alike
    assert frozen.lmd_m > 1.5 * frozen.lmd_f
    assert shifted.lmd_m < 1.1 * shifted.lmd_f
    assert frozen.lmd_m > 2 * noisy.lmd_m  # beyond the landmarks' jitter on a noisy copy


def test_network_metrics_without_weights_are_nan_with_the_reason(scored, tmp_path):
    rows, result = scored
    assert all(math.isnan(r.lse_c) and math.isnan(r.lse_d) for r in rows.values())
    assert all(math.isnan(s[c]) for s in result.summary for c in (lm.LSE_C, lm.LSE_D, lm.FID, lm.FVD))
    syncnet = next(s for s in result.skipped if s.startswith("LSE-C/LSE-D"))
    assert "SyncNet weights syncnet_v2.model not in the weights store" in syncnet
    assert "theval weights fetch --model syncnet" in syncnet
    assert any(s.startswith("FID skipped: FID Inception weights pt_inception-2015-12-05-6726825d.pth")
               for s in result.skipped)
    assert any(s.startswith("FVD skipped: FVD I3D weights i3d_torchscript.pt") for s in result.skipped)




def test_cli_pairs_by_name_and_failures_stay_alone(videos, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli(["classic", "--generated", str(videos / "broken"), "--gt", str(videos / "gt"),
                "--out", str(out), "--model", "m", "--store", str(tmp_path / "store"), "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 3  # partial
    rows = {r["video"].rsplit("/", 1)[1]: r for r in csv.DictReader(open(out / "classic.csv"))}
    assert list(next(iter(rows.values()))) == list(classic_metrics.CSV_COLUMNS)
    assert rows["clip_a.mp4"]["status"] == "ok" and float(rows["clip_a.mp4"]["ssim"]) == 1.0
    assert rows["orphan.mp4"]["reason"] == (f"no GT video named orphan.mp4 in {videos / 'gt'}: classic metrics "
                                            "pair generated and GT videos by file name")
    assert rows["clip_b.mp4"]["status"] == "failed" and "clip_b.mp4" in rows["clip_b.mp4"]["reason"]
    assert "no face found" in rows["clip_c.mp4"]["reason"] and "clip_c.mp4" in rows["clip_c.mp4"]["reason"]
    assert rows["clip_a.mp4"]["lse_c"] == ""  # NaN, as the project's CSVs write it
    summary = list(csv.DictReader(open(out / "classic_summary.csv")))
    assert list(summary[0])[:9] == ["Model", "LMD-F", "LMD-M", "PSNR", "SSIM", "LSE-C", "LSE-D", "FID", "FVD"]
    assert summary[0]["Model"] == "m" and summary[0]["n:PSNR"] == "1" and summary[0]["FID"] == ""
    assert printed.count("LSE-C/LSE-D skipped: SyncNet weights syncnet_v2.model") == 1  # once
    assert "1/4" in printed  # videos scored of those generated


def test_no_pair_at_all_is_one_clear_error(videos, tmp_path):
    folder = tmp_path / "unpaired"
    folder.mkdir()
    shutil.copy(videos / "gt" / "clip_a.mp4", folder / "other.mp4")
    with pytest.raises(UserError, match="none of the 1 generated video.*same file name"):
        classic_metrics.run(classic_metrics.generated_models([str(folder)]), videos / "gt", store=tmp_path, progress=False)
    assert cli(["classic", "--generated", str(folder), "--gt", str(tmp_path / "nowhere")]) == 1
