"""Known answers for the Fréchet distance behind FID and FVD (pure.metrics.classic), and the FID/FVD
backends' behaviour without weights. Fast: no network runs."""
import numpy as np
import pytest
import scipy.linalg

from theval_mesh.pure.errors import WeightsMissing
from theval_mesh.pure.metrics import classic as lm
from theval_mesh.pure.metrics.classic import frechet_distance_stats, gaussian_stats


def independent(mu1, s1, mu2, s2):
    """The textbook formula with scipy's sqrtm, written apart from the code under test."""
    root = scipy.linalg.sqrtm(s1 @ s2)
    return float(np.sum((mu1 - mu2) ** 2) + np.trace(s1 + s2 - 2 * np.real(root)))


def test_a_set_against_itself_is_zero():
    x = np.random.default_rng(0).normal(size=(500, 16)) * np.arange(1, 17)
    mu, s = lm.gaussian_stats(x)
    assert abs(lm.frechet_distance(x, x)) <= 1e-6 * np.trace(s)


def test_diagonal_covariances_closed_form():
    rng = np.random.default_rng(1)
    d = 8
    mu1, mu2 = rng.normal(size=d), rng.normal(size=d)
    v1, v2 = rng.uniform(0.5, 3, d), rng.uniform(0.5, 3, d)
    closed = np.sum((mu1 - mu2) ** 2) + np.sum(v1 + v2 - 2 * np.sqrt(v1 * v2))
    got = lm.frechet_distance_stats(mu1, np.diag(v1), mu2, np.diag(v2))
    assert got == pytest.approx(closed, rel=1e-10)
    assert got == pytest.approx(independent(mu1, np.diag(v1), mu2, np.diag(v2)), rel=1e-10)


def test_sampled_gaussians_against_scipy_and_the_population_value():
    rng = np.random.default_rng(2)
    d = 6
    a_ = rng.normal(size=(d, d))
    s1 = a_ @ a_.T + d * np.eye(d)  # a general (non-commuting) covariance
    v2 = rng.uniform(1, 4, d)
    mu1, mu2 = np.zeros(d), np.full(d, 0.5)
    a = rng.multivariate_normal(mu1, s1, size=20000)
    b = rng.multivariate_normal(mu2, np.diag(v2), size=20000)
    got = lm.frechet_distance(a, b)
    ma, sa = a.mean(0), np.cov(a, rowvar=False)
    mb, sb = b.mean(0), np.cov(b, rowvar=False)
    assert got == pytest.approx(independent(ma, sa, mb, sb), rel=1e-9)  # the same sample statistics
    assert got == pytest.approx(independent(mu1, s1, mu2, np.diag(v2)), rel=0.05)  # the population's


def test_fvd_statistics_are_stylegan_vs_biased_covariance():
    x = np.random.default_rng(3).normal(size=(10, 3))
    mu, s = lm.gaussian_stats(x, ddof=0)
    raw = x.T @ x / len(x) - np.outer(mu, mu)  # StyleGAN-V FeatureStats.get_mean_cov
    assert np.allclose(s, raw)


def test_fewer_samples_than_dimensions_is_finite_and_biased():
    # N <= D: both covariances singular (rank N - 1); sqrtm of the singular product stays finite,
    # the value is defined (as pytorch-fid's) but falls as N grows for the same two distributions
    rng = np.random.default_rng(4)
    d = 64
    values = []
    for n in (16, 48):
        a = rng.normal(size=(n, d))
        b = rng.normal(size=(n, d)) + 0.1
        value = lm.frechet_distance(a, b)
        assert np.isfinite(value)
        mu_a, s_a = lm.gaussian_stats(a)
        assert np.linalg.matrix_rank(s_a) == n - 1
        values.append(value)
    assert values[0] > values[1] > d * 0.01  # population value: 64 x 0.1^2 = 0.64


def test_zero_covariances_leave_the_mean_term():
    s = np.zeros((3, 3))  # sqrtm(0) is 0: finite, no nudge
    assert lm.frechet_distance_stats(np.zeros(3), s, np.ones(3), s) == pytest.approx(3.0)


def test_a_large_imaginary_part_is_refused_unless_asked_to_keep_the_real_part():
    s1 = np.diag([1.0, 1.0])
    s2 = -np.eye(2)  # not a covariance: sqrtm(s1 s2) = i I
    with pytest.raises(ValueError, match="imaginary component"):
        lm.frechet_distance_stats(np.zeros(2), s1, np.zeros(2), s2)
    assert np.isfinite(lm.frechet_distance_stats(np.zeros(2), s1, np.zeros(2), s2, imaginary_atol=None))


def test_too_few_rows_are_named():
    with pytest.raises(ValueError, match="N > 1"):
        lm.gaussian_stats(np.zeros((1, 4)))


def test_fvd_clip_windows_are_stated():
    from theval_mesh.backends.classic.fvd import clip_windows, video_clips

    assert clip_windows(40) == [(0, 16), (16, 32)]
    assert clip_windows(40, clips_per_video=1) == [(0, 16)]
    assert clip_windows(15) == []
    frames = [np.full((2, 2, 3), i, np.uint8) for i in range(40)]
    clips = list(video_clips(frames))
    assert [c[0, 0, 0, 0] for c in clips] == [0, 16] and clips[0].shape == (16, 2, 2, 3)


def test_missing_weights_name_the_file_and_the_fix(tmp_path):
    from theval_mesh.backends.classic import fid, fvd

    with pytest.raises(WeightsMissing, match=r"pt_inception-2015-12-05-6726825d.pth not in the weights store.*"
                                             r"theval weights fetch --model fid-inception"):
        fid.inception_features([np.zeros((8, 8, 3), np.uint8)], store=tmp_path)
    with pytest.raises(WeightsMissing, match=r"i3d_torchscript.pt not in the weights store.*"
                                             r"theval weights fetch --model fvd-i3d"):
        fvd.i3d_features([[np.zeros((8, 8, 3), np.uint8)] * 16], store=tmp_path)


def test_a_foreign_file_under_the_fid_name_is_not_taken_for_a_stand_in(tmp_path):
    from theval_mesh.backends.classic import networks

    (tmp_path / "pt_inception-2015-12-05-6726825d.pth").write_bytes(b"other")
    (tmp_path / "STAND-IN.json").write_text('{"seed": 0, "files": {"pt_inception-2015-12-05-6726825d.pth": '
                                           '{"sha256": "not this file"}}}')
    with pytest.raises(WeightsMissing, match="is not the published FID Inception weights"):
        networks.weight_file("fid-inception", tmp_path)


# ---------------------------------------------------------------- the bootstrap's exact route
@pytest.mark.parametrize("n1,n2,d", [(30, 40, 64), (200, 150, 16)], ids=["rows<dims", "rows>dims"])
@pytest.mark.parametrize("ddof", [0, 1], ids=["biased(FVD)", "unbiased(FID)"])
def test_the_weighted_route_is_the_sqrtm_distance(n1, n2, d, ddof):
    from theval_mesh.pure.metrics.classic import frechet_distance_weighted
    rng = np.random.default_rng(3)
    a = rng.normal(size=(n1, d)) @ rng.normal(size=(d, d)) * 0.3
    b = rng.normal(0.2, 1.0, size=(n2, d))
    ones_a, ones_b = np.ones(n1), np.ones(n2)
    want = frechet_distance_stats(*gaussian_stats(a, ddof), *gaussian_stats(b, ddof), imaginary_atol=None)
    assert frechet_distance_weighted(a, ones_a, b, ones_b, ddof) == pytest.approx(want, rel=1e-6)
    # scipy's sqrtm on the covariances themselves, independently of our Fréchet code
    mu1, s1 = a.mean(0), np.cov(a, rowvar=False, ddof=ddof)
    mu2, s2 = b.mean(0), np.cov(b, rowvar=False, ddof=ddof)
    direct = (mu1 - mu2) @ (mu1 - mu2) + np.trace(s1 + s2 - 2 * scipy.linalg.sqrtm(s1 @ s2).real)
    assert frechet_distance_weighted(a, ones_a, b, ones_b, ddof) == pytest.approx(direct, rel=1e-6)
    # integer weights are rows drawn that many times
    wa, wb = rng.integers(0, 3, n1).astype(float), rng.integers(0, 3, n2).astype(float)
    duplicated = frechet_distance_stats(*gaussian_stats(np.repeat(a, wa.astype(int), 0), ddof),
                                        *gaussian_stats(np.repeat(b, wb.astype(int), 0), ddof), imaginary_atol=None)
    assert frechet_distance_weighted(a, wa, b, wb, ddof) == pytest.approx(duplicated, rel=1e-6)


def test_a_set_interval_holds_the_point_estimate_and_needs_two_videos():
    from theval_mesh.pure.metrics.classic import frechet_distance_weighted
    from theval_mesh.pure.scoring.uncertainty import set_interval
    rng = np.random.default_rng(5)
    videos = [rng.normal(size=(20, 8)) for _ in range(6)]   # 6 generated videos of 20 frames
    gts = [rng.normal(0.5, 1.0, size=(20, 8)) for _ in range(6)]
    a, b, rows = np.concatenate(videos), np.concatenate(gts), [20] * 6

    def statistic(counts):
        return frechet_distance_weighted(a, np.repeat(counts, rows), b, np.repeat(counts, rows), 1)
    point = statistic(np.ones(6))
    low, high = set_interval(statistic, 6, resamples=300)
    assert low < point < high
    assert set_interval(statistic, 6, resamples=300) == (low, high)  # seeded
    assert all(np.isnan(set_interval(statistic, 1)))


def test_pairs_sharing_a_gt_video_give_the_point_estimate_on_all_ones_and_count_draws():
    """Two generated videos pair with GT video 0, one with GT video 1: all-ones counts are the
    point estimate (each GT video once), and a pair drawn twice is its rows duplicated."""
    from theval_mesh.pure.metrics.classic import pair_resample_distance
    rng = np.random.default_rng(7)
    gen = [rng.normal(size=(12, 6)) for _ in range(3)]
    gts = [rng.normal(0.3, 1.0, size=(10, 6)), rng.normal(0.3, 1.0, size=(9, 6))]
    statistic = pair_resample_distance(np.concatenate(gen), [12, 12, 12], np.concatenate(gts), [10, 9], [0, 0, 1])
    point = lm.frechet_distance(np.concatenate(gen), np.concatenate(gts))
    assert statistic(np.ones(3)) == pytest.approx(point, rel=1e-9)
    # GT 0's pairs both drawn twice: it counts twice, like explicit duplication
    both = statistic(np.array([2.0, 2.0, 0.0]))
    dup = frechet_distance_stats(*gaussian_stats(np.concatenate([gen[0], gen[0], gen[1], gen[1]])),
                                 *gaussian_stats(np.concatenate([gts[0], gts[0]])), imaginary_atol=None)
    assert both == pytest.approx(dup, rel=1e-6)


def test_a_resample_of_frameless_videos_has_no_value():
    from theval_mesh.pure.metrics.classic import frechet_distance_weighted
    a, b = np.random.default_rng(1).normal(size=(2, 5, 3))
    with np.errstate(all="raise"):  # no division by a zero weight on the way
        assert np.isnan(frechet_distance_weighted(a, np.zeros(5), b, np.ones(5), 0))
        assert np.isnan(frechet_distance_weighted(a, np.r_[1.0, np.zeros(4)], b, np.ones(5), 1))


@pytest.mark.parametrize("n1, n2, d", [(40, 30, 6), (5, 9, 12)])
def test_torchmetrics_distance_is_the_sqrtm_distance_in_float32(n1, n2, d):
    """torchmetrics' route (float64 sums, eigenvalues of S_r S_f) gives the square-root distance,
    full rank or not (fewer rows than dimensions), rounded to float32; one set against itself is 0."""
    rng = np.random.default_rng(n1 + d)
    a, b = rng.normal(0.3, 1, (n1, d)), rng.normal(0, 0.5, (n2, d))
    expected = lm.frechet_distance_stats(*gaussian_stats(a), *gaussian_stats(b), imaginary_atol=None)
    got = lm.frechet_distance_torchmetrics(a, b)
    assert got == pytest.approx(expected, rel=1e-6) and got == float(np.float32(got))
    assert lm.frechet_distance_torchmetrics(a, a) == pytest.approx(0, abs=1e-5)
    with pytest.raises(ValueError, match="more than one sample"):
        lm.frechet_distance_torchmetrics(a[:1], b)


@pytest.mark.parametrize("n, sampling, expected", [
    (5, "all", [0, 1, 2, 3, 4]), (10, "every:4", [0, 4, 8]), (10, "count:4", [0, 3, 6, 9]),
    (3, "count:4", [0, 1, 2]), (10, "first:3", [0, 1, 2]), (2, "first:3", [0, 1]), (0, "every:2", [])])
def test_fid_frame_samplings(n, sampling, expected):
    assert lm.fid_frame_indices(n, sampling) == expected


@pytest.mark.parametrize("sampling", ["every", "every:0", "count:-1", "some:3", "all:2", "first:x"])
def test_a_wrong_frame_sampling_names_the_forms(sampling):
    with pytest.raises(ValueError, match="one of all, every:K, count:N, first:N"):
        lm.fid_frame_indices(10, sampling)


def test_feature_stats_moments_are_the_biased_mean_and_covariance_from_float32_rows():
    """StyleGAN-V's FeatureStats (cd-fvd's copy): raw moments of the float32 rows; equal to the
    centred biased covariance up to rounding, and float64 rows are first rounded to float32."""
    x = np.random.default_rng(3).normal(size=(50, 6)) * np.arange(1, 7) + 10
    mean, cov = lm.feature_stats_moments(x)
    mu, s = gaussian_stats(x.astype(np.float32), ddof=0)
    assert np.allclose(mean, mu, rtol=1e-12) and np.allclose(cov, s, rtol=1e-9, atol=1e-9)
    assert np.array_equal(mean, x.astype(np.float32).astype(np.float64).sum(0) / 50)
    with pytest.raises(ValueError, match="N > 0"):
        lm.feature_stats_moments(np.zeros((0, 4)))
