"""The short-accumulator model of chapter 12H (gpubook.models.accumulation) and the GPU record of
what promotion buys (gpubook.run.promotion): writing, finding and describing it."""

import json

import numpy as np
import pytest
import torch

from gpubook.__main__ import main as cli
from gpubook.models import accumulation as acc
from gpubook.run import promotion


def test_keep_bits_truncates_toward_zero_or_rounds_to_nearest():
    s = 2.0**13
    assert acc.keep_bits(s + 0.75, 14) == s and acc.keep_bits(s + 0.75, 24) == s + 0.75
    assert acc.keep_bits(-(s + 0.75), 14) == -s                        # toward zero, both signs
    assert acc.keep_bits(s + 0.75, 14, "nearest") == s + 1
    assert acc.keep_bits(np.array([0.0, 1.0, 3.0]), 1).tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="rounding"):
        acc.keep_bits(1.0, 14, "up")


@pytest.mark.parametrize("promote", [None, 128])
def test_the_model_is_exact_while_the_sums_fit_in_14_bits(promote):
    g = np.random.default_rng(1)
    a, b = g.integers(0, 3, (8, 1024)).astype(float), g.integers(0, 3, (8, 1024)).astype(float)
    out = acc.accumulate(a, b, (256, 1024), promote)      # sums <= 4 * 1024 < 2^14
    for k, (d, ref) in out.items():
        np.testing.assert_array_equal(ref, a[:, :k] @ b[:, :k].T)
        np.testing.assert_array_equal(d, ref)


def test_the_model_loses_bits_once_the_sum_outgrows_14_bits():
    a = np.full((1, 16384), 1.125)                   # products 1.265625 = 81/64
    out = acc.accumulate(a, a, (4096, 16384), None)
    d, ref = out[4096]
    assert d[0, 0] == ref[0, 0] == 4096 * 81 / 64   # 5184 = 81 * 2^6: 7 significant bits
    d, ref = out[16384]
    assert ref[0, 0] == 16384 * 81 / 64 and d[0, 0] < ref[0, 0]    # odd multiples of 1/2 past 2^13


@pytest.fixture(scope="module")
def curves():
    return acc.model_curves(ks=(1024, 4096, 16384), shape=(16, 16))


def test_without_promotion_the_error_grows_about_linearly_with_k(curves):
    s = curves["no promotion"]
    assert s["median"][0] < s["median"][1] < s["median"][2]
    assert 0.8 < acc.growth(s["median"], s["k"]) < 1.2
    # the back-of-envelope estimate is the model's median within a factor of 1.5
    for k, m in zip(s["k"], s["median"]):
        assert acc.estimate(k) / 1.5 < m < 1.5 * acc.estimate(k)


def test_with_promotion_the_error_stays_flat_and_far_below(curves):
    p, n = curves["promoted every 128"], curves["no promotion"]
    assert max(p["median"]) < 1.5 * min(p["median"])
    assert p["max"][-1] < n["max"][-1] / 20


def test_the_model_refuses_k_it_cannot_reach():
    a = np.ones((2, 256))
    with pytest.raises(ValueError, match="multiple of 128"):
        acc.accumulate(a, a, (192,), 128)
    with pytest.raises(ValueError, match="whole number"):
        acc.accumulate(a, a, (256,), 48)
    with pytest.raises(ValueError, match="within"):
        acc.accumulate(a, a, (512,), None)


def _fake(date, gpu="NVIDIA H100 80GB HBM3", fast=(2.6e-3, 1.1e-2), prom=(1.2e-7, 1.4e-7), time="12:00:00"):
    ks = [4096, 16384]
    return {"format": 1, "run": {"gpu": gpu, "capability": "9.0", "date": date, "time": time, "torch": "2.8.0",
                                 "cuda": "12.8", "seconds": 3.0},
            "inputs": {"M": 2048, "N": 2048, "ks": ks, "seed": 0, "distribution": promotion.DISTRIBUTION,
                       "scales": 1.0, "out_dtype": "float32", "reference": "fp64"},
            "series": {"fast": {"k": ks, "max": list(fast), "median": list(fast), "mean": list(fast)},
                       "promoted": {"k": ks, "max": list(prom), "median": list(prom), "mean": list(prom)}},
            "skipped": {"blockwise": "RuntimeError: not supported"}}


def test_newest_finds_the_latest_record_by_date_then_name(tmp_path):
    assert promotion.newest(tmp_path) is None
    assert promotion.newest(tmp_path / "missing") is None
    promotion.write(_fake("2026-12-07", time="01:00:00"), tmp_path / "2026-12-07-a-h200.json")
    promotion.write(_fake("2026-12-06"), tmp_path / "2026-12-06-a-h100.json")
    promotion.write(_fake("2026-12-06", fast=(1e-3, 5e-3)), tmp_path / "2026-12-06-b-h100.json")
    doc = promotion.newest(tmp_path)
    assert doc["file"] == "2026-12-07-a-h200.json"                  # the date first
    (tmp_path / "2026-12-07-a-h200.json").unlink()
    promotion.write(_fake("2026-12-06", time="18:00:00"), tmp_path / "2026-12-06-h100.json")
    doc = promotion.newest(tmp_path)
    assert doc["file"] == "2026-12-06-h100.json"                    # then the time, not the name
    (tmp_path / "2026-12-06-h100.json").unlink()
    doc = promotion.newest(tmp_path)
    assert doc["file"] == "2026-12-06-b-h100.json" and doc["series"]["fast"]["max"] == [1e-3, 5e-3]


def test_a_malformed_record_is_refused(tmp_path):
    bad = _fake("2026-12-06")
    bad["series"]["fast"]["max"] = [1e-3]
    (tmp_path / "x.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="fast"):
        promotion.newest(tmp_path)


def test_records_go_to_their_own_folder_never_beside_the_replays(tmp_path):
    doc = _fake("2026-12-06")
    with pytest.raises(ValueError, match="verification replays"):
        promotion.write(doc, promotion.RESULTS / "2026-12-06-promotion-h100.json")
    first = promotion.default_path(doc, tmp_path)
    assert first.name == "2026-12-06-a-h100.json"
    promotion.write(doc, first)
    assert promotion.default_path(doc, tmp_path).name == "2026-12-06-b-h100.json"
    assert promotion.gpu_slug("NVIDIA H200") == "h200" and promotion.gpu_slug("NVIDIA GH200 480GB") == "gh200"


def test_the_words_say_not_measured_without_a_record_and_quote_one_with_it(curves):
    none = acc.describe(None, curves)
    assert none["source"].startswith("not measured yet") and "python -m gpubook promotion" in none["sentence"]
    words = acc.describe(dict(_fake("2026-12-06"), file="2026-12-06-h100.json"), curves)
    assert "NVIDIA H100 80GB HBM3 on 2026-12-06" in words["source"]
    assert "0.26% at K = 4096 and 1.1% at K = 16384" in words["sentence"]
    assert "1.2e-07 at K = 4096" in words["sentence"] and "blockwise could not run" in words["sentence"]
    ratio = 1.1e-2 / acc.at(curves["no promotion"], 16384)
    assert f"{ratio:.2g}× the model's" in words["sentence"]


def test_the_figure_draws_the_model_alone_or_with_the_measured_points(curves):
    alone = acc.plot_promotion(curves)
    texts = [t.get_text() for t in alone.axes[0].texts]
    assert any("not measured" in t for t in texts)
    both = acc.plot_promotion(curves, _fake("2026-12-06")["series"], "H100")
    labels = both.axes[0].get_legend_handles_labels()[1]
    assert "H100, fast accumulation: max" in labels and "H100, default (promoted): max" in labels
    assert not both.axes[0].texts
    lo, hi = both.axes[0].get_ylim()
    assert lo < 1.2e-7 < hi                                       # the measured points are inside


def test_measure_runs_end_to_end_on_the_cpu():
    m = promotion.measure(ks=(256, 512), shape=(32, 32), device="cpu")
    for name in ("fast", "promoted"):
        s = m["series"][name]
        assert s["k"] == [256, 512] and max(s["max"]) < 1e-5     # the CPU accumulates in fp32
    assert set(m["series"]) | set(m["skipped"]) == set(promotion.SERIES)


def test_the_command_line_names_the_record_and_needs_a_gpu(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(promotion, "main", lambda *a: seen.setdefault("args", a) and 0)
    assert cli(["promotion", "--results", str(tmp_path / "r.json"), "--ks", "1024,2048", "--size", "256"]) == 0
    assert seen["args"] == (tmp_path / "r.json", [1024, 2048], 256, 0)
    monkeypatch.undo()
    if not torch.cuda.is_available():
        assert promotion.main(tmp_path / "r.json", [1024], 128, 0) == 2 and not (tmp_path / "r.json").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (Hopper for FP8)")
def test_on_a_hopper_gpu_fast_accumulation_loses_more_than_promotion():
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("torch._scaled_mm's FP8 GEMM needs sm_89 or later; the short accumulator is Hopper's")
    m = promotion.measure(ks=(4096, 16384), shape=(256, 256))
    fast, prom = m["series"]["fast"], m["series"]["promoted"]
    assert fast["median"][1] > fast["median"][0]
    assert fast["max"][1] > 3 * prom["max"][1]


def test_errors_read_as_percent_down_to_1e_5_then_in_powers_of_ten():
    assert [acc.say_error(v) for v in (0.0116, 2.6e-3, 8.6e-5, 1.2e-7, None)] == [
        "1.2%", "0.26%", "0.0086%", "1.2e-07", "not measured yet"]


def test_no_record_is_written_when_the_two_accumulations_cannot_run(monkeypatch, tmp_path):
    doc = _fake("2026-12-06")
    del doc["series"]["promoted"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(promotion, "record", lambda *a: doc)
    assert promotion.main(tmp_path / "r.json", [4096], 256, 0) == 1 and not (tmp_path / "r.json").exists()
    doc["series"]["promoted"] = doc["series"]["fast"]
    assert promotion.main(tmp_path / "r.json", [4096], 256, 0) == 0
    assert promotion.newest(tmp_path)["run"]["gpu"] == "NVIDIA H100 80GB HBM3"
