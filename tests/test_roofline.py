"""Roofline arithmetic against hand calculations; plots; measured points with and without results."""

import json
import re
from pathlib import Path

import pytest

from gpubook import hardware, plots, roofline as rl
from gpubook.facts.hardware import B200, H100, H200

CHAPTER = Path(__file__).resolve().parent.parent / "chapters" / "02-roofline.md"


# -- ridges and peaks ---------------------------------------------------------------------------
def test_ridges_match_the_reference_table():
    assert rl.ridge(B200) == pytest.approx(2250e12 / 8.0e12)
    assert round(rl.ridge(B200)) == 281
    assert rl.ridge(H200) == pytest.approx(989e12 / 4.8e12)
    assert round(rl.ridge(H200)) == 206
    assert rl.ridge(H100) == pytest.approx(989e12 / 3.35e12)
    assert rl.ridge(B200, "fp8") == pytest.approx(4500e12 / 8.0e12)
    assert rl.ridge(B200, "fp16") == rl.ridge(B200, "bf16") == B200.ridge_bf16


def test_no_peak_is_invented_for_fp32():
    with pytest.raises(ValueError):
        rl.ridge(B200, "fp32")


# -- intensities against hand counts ------------------------------------------------------------
def test_elementwise():
    assert rl.intensity_elementwise(2, 1, 4, 1) == pytest.approx(1 / 12)  # fp32 x + y
    assert rl.intensity_elementwise(2, 1, 2, 1) == pytest.approx(1 / 6)  # bf16 x + y
    assert rl.intensity_elementwise(1, 1, 2, 8) == pytest.approx(8 / 4)  # 8 FLOPs, bf16 in/out


def test_reduction():
    # fp32 sum of each row of 8192 x 8192: 8191 adds per row; 8192 reads + 1 write per row
    assert rl.intensity_reduction(8192, 8192, 4) == pytest.approx(8191 / (8193 * 4))
    assert rl.intensity_reduction(1, 1000, 2, out_bytes=4) == pytest.approx(999 / (2000 + 4))


def test_gemm():
    n = 4096
    assert rl.intensity_gemm(n, n, n, 2, 2) == pytest.approx(2 * n**3 / (3 * n * n * 2))
    assert rl.intensity_gemm(n, n, n, 2, 2) == pytest.approx(2 * n / 6)
    # fp8 inputs, bf16 output, rectangular
    M, N, K = 16, 8192, 4096
    assert rl.intensity_gemm(M, N, K, 1, 2) == pytest.approx(2 * M * N * K / (M * K + N * K + 2 * M * N))
    assert rl.gemm_flops(M, N, K) == 2 * M * N * K


def test_tiled_gemm():
    assert rl.intensity_gemm_tiled(128, 128, 2) == pytest.approx(2 * 128 * 128 * 64 / (256 * 64 * 2))
    assert rl.intensity_gemm_tiled(128, 256, 2) == pytest.approx(2 * 128 * 256 / (384 * 2))
    # 4096^3 with 128 x 128 tiles: A read 32 times, B read 32 times, D written once
    q = rl.gemm_tiled_bytes(4096, 4096, 4096, 128, 128, 2)
    assert q == pytest.approx(2 * (4096 * 4096 * 32) * 2 + 4096 * 4096 * 2)
    # one tile covering the whole output moves the minimum
    assert rl.gemm_tiled_bytes(256, 256, 512, 256, 256, 2) == rl.gemm_bytes(256, 256, 512, 2)


def test_attention():
    S, d = 8192, 128
    flops = 4 * S * S * d
    assert rl.intensity_attention(S, S, d, 2) == pytest.approx(flops / (4 * S * d * 2))
    assert rl.intensity_attention(S, S, d, 2) == pytest.approx(S / 2)
    unfused = flops / (4 * S * d * 2 + 4 * S * S * 4)
    assert rl.intensity_attention(S, S, d, 2, score_bytes=4) == pytest.approx(unfused)
    assert rl.intensity_attention(S, S, d, 2, causal=True) == pytest.approx(S / 4)
    assert rl.attention_flops(2, 16, S, S, d) == pytest.approx(32 * flops)


def test_min_time_of_a_4096_cubed_fp16_gemm_on_b200():
    n = 4096
    t = rl.min_time(2 * n**3, 3 * n * n * 2, B200)
    assert t == pytest.approx(2 * n**3 / 2250e12)  # compute-bound: 61.1 µs
    assert 61.0e-6 < t < 61.2e-6
    assert rl.min_time(1e6, 8e12, B200) == pytest.approx(1.0)  # memory-bound: 8 TB at 8 TB/s
    assert rl.bound(1 / 12, B200) == "memory" and rl.bound(1366, B200) == "compute"
    assert rl.attainable(1.0, H200) == pytest.approx(4.8e12)


def test_littles_law():
    assert rl.bytes_in_flight(8.0e12, 800e-9) == pytest.approx(6.4e6)
    assert rl.registers_per_thread(1024) == hardware.REGISTERS_PER_SM // 1024


# -- plots ------------------------------------------------------------------------------------
def test_plot_roofline_axes_and_ridge():
    fig = plots.plot_roofline([B200, H200])
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "FLOP" in ax.get_xlabel() and "TFLOP/s" in ax.get_ylabel()
    roofs = {ln.get_gid(): ln for ln in ax.get_lines() if ln.get_gid()}
    b200 = roofs["roof-B200-bf16"]
    assert b200.get_xdata()[1] == pytest.approx(281.25)
    assert b200.get_ydata()[1] == pytest.approx(2250)
    assert roofs["roof-H200-bf16"].get_xdata()[1] == pytest.approx(989 / 4.8)
    assert fig.get_facecolor()[3] == 1.0 and fig.get_facecolor()[:3] == (1.0, 1.0, 1.0)
    assert plots.png(fig).data[:8] == b"\x89PNG\r\n\x1a\n"


# -- measured points: with and without a results file ------------------------------------------
def _case(name, ms, bytes, flops, baseline=None, baseline_ms=None, status="measured"):
    return {"case": f"x--{name}--perf", "chapter": "01-execution-model", "name": name, "kind": "perf",
            "runs_on": ["sm_90a", "sm_100a"], "status": status, "ms": ms, "bytes": bytes,
            "flops": flops, "baseline": baseline, "baseline_ms": baseline_ms}


def _write_run(d: Path, date: str, gpu: str, cases):
    run = {"gpu": gpu, "arch": "sm_90a", "date": date, "torch": "2.x", "sanitizer": []}
    (d / f"{date}-{gpu.split()[-1].lower()}.json").write_text(
        json.dumps({"format": 1, "run": run, "cases": cases}))


@pytest.fixture
def results_dir(tmp_path):
    N = 1 << 24
    _write_run(tmp_path, "2026-11-01", "NVIDIA H200", [_case("vadd", 1.0, 12.0 * N, N)])
    _write_run(tmp_path, "2026-11-29", "NVIDIA H200", [
        _case("vadd", 0.05, 12.0 * N, N, "add", 0.048),
        _case("copy_vec4", 0.035, 8.0 * N, None, "copy", 0.034),
        _case("copy_naive", None, 8.0 * N, None, status="failed"),
        _case("gemm_v4", 0.2, None, 2.0 * 4096**3, "matmul_nt", 0.18),
        _case("something_else", 0.1, 1e6, 1e6),
    ])
    return tmp_path


def test_no_results_means_no_points(tmp_path):
    assert rl.measured_points(tmp_path) == []
    text = rl.describe_points([], live=False)
    assert "No measurement" in text
    assert "No measured point" in rl.points_markdown([])
    rows = rl.ladder_rows(tmp_path)
    assert len(rows) == len(rl.GEMM_LADDER) and all(r["us"] is None for r in rows)
    assert rl.ladder_markdown(rows).count("not measured") == 3 * len(rl.GEMM_LADDER)
    fig = plots.plot_roofline(rl.gpus_of([]) or [B200], points=[], note="no measurement yet")
    ax = fig.axes[0]
    assert not [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith(("point-", "copy-"))]
    assert any("no measurement" in t.get_text() for t in ax.texts)
    both = plots.plot_measured([], [B200], note="no measurement yet")
    assert len(both.axes) == 2
    assert not [p for p in both.axes[1].patches if (p.get_gid() or "").startswith("bar-")]
    assert all(any("no measurement" in t.get_text() for t in a.texts) for a in both.axes)


def test_results_give_newest_points(results_dir):
    pts = {p.label: p for p in rl.measured_points(results_dir)}
    assert set(pts) == {"vadd", "torch.add (vadd shapes)", "copy_vec4", "torch copy_ (copy_vec4 shapes)"}
    v = pts["vadd"]
    assert v.date == "2026-11-29" and v.ms == 0.05  # the newer run wins
    assert v.intensity == pytest.approx(1 / 12)
    assert v.bandwidth == pytest.approx(12.0 * (1 << 24) / 50e-6)
    assert pts["copy_vec4"].intensity is None and pts["copy_vec4"].hardware is H200
    assert pts["torch.add (vadd shapes)"].source == "torch"
    assert rl.gpus_of(list(pts.values())) == [H200]
    table = rl.points_markdown(list(pts.values()))
    assert "H200, 2026-11-29" in table
    pct = 100 * v.bandwidth / H200.hbm_bandwidth
    assert f"| {pct:.0f} |" in table
    assert "H200 on 2026-11-29" in rl.describe_points(list(pts.values()), live=False)
    fig = plots.plot_roofline([H200], points=list(pts.values()))
    gids = {ln.get_gid() for ln in fig.axes[0].get_lines()}
    assert {"point-vadd", "point-torch.add (vadd shapes)", "copy-copy_vec4"} <= gids
    point = next(ln for ln in fig.axes[0].get_lines() if ln.get_gid() == "point-vadd")
    assert point.get_xdata()[0] == pytest.approx(1 / 12)
    assert point.get_ydata()[0] == pytest.approx((1 << 24) / 50e-6 / 1e12)
    both = plots.plot_measured(list(pts.values()), [H200])
    left, right = both.axes
    assert {ln.get_gid() for ln in left.get_lines()} >= {"point-vadd", "roof-H200-bf16"}
    assert not any((ln.get_gid() or "").startswith("copy-") for ln in left.get_lines())
    bars = {b.get_gid(): b.get_width() for b in right.patches if (b.get_gid() or "").startswith("bar-")}
    assert bars["bar-copy_vec4"] == pytest.approx(8.0 * (1 << 24) / 35e-6 / 1e12)
    assert len(bars) == 4 and not left.texts


def test_ladder_fills_from_results(results_dir):
    rows = {r["name"]: r for r in rl.ladder_rows(results_dir)}
    r = rows["gemm_v4"]
    rate = 2.0 * 4096**3 / 0.2e-3
    assert r["us"] == pytest.approx(200) and r["tflops"] == pytest.approx(rate / 1e12)
    assert r["percent"] == pytest.approx(100 * rate / H200.bf16_flops)
    assert rows["gemm_v1"]["us"] is None
    md = rl.ladder_markdown(list(rows.values()))
    assert f"{rate / 1e12:.0f}" in md and "NVIDIA H200, 2026-11-29" in md
    assert md.count("not measured") == 3 * (len(rl.GEMM_LADDER) - 1)


def test_ladder_names_are_unique_and_numbered():
    names = [s.name for s in rl.GEMM_LADDER]
    assert len(set(names)) == len(names)
    assert [s.number for s in rl.GEMM_LADDER] == list(range(1, len(names) + 1))
    assert {s.chapter for s in rl.GEMM_LADDER} == {8, 9, 10}


def test_ladder_rows_say_where_each_step_is_built(tmp_path):
    chapters = tmp_path / "chapters"
    chapters.mkdir()
    rows = rl.ladder_rows(tmp_path)
    md = rl.ladder_markdown(rows, chapters)
    assert md.count("chapter 8 (in preparation)") == sum(s.chapter == 8 for s in rl.GEMM_LADDER)
    assert "](" not in md  # no link to a chapter that does not exist
    (chapters / "09-gemm-pipelines.md").write_text("# 9. Pipelines\n")
    md = rl.ladder_markdown(rows, chapters)
    assert md.count("[chapter 9](09-gemm-pipelines.md)") == sum(s.chapter == 9 for s in rl.GEMM_LADDER)
    assert "chapter 10 (in preparation)" in md


# -- the chapter's prose carries no typed spec numbers -------------------------------------------
def test_chapter_glues_every_computed_number():
    text = CHAPTER.read_text()
    prose = re.sub(r"```\{code-cell\}.*?\n```", "", text, flags=re.S)
    for number in ("2250", "281", "206", "295", "8.0 TB", "4.8 TB", "3.35", "1365", "61.1", "12.6"):
        assert number not in prose, f"typed number {number!r} in the prose of {CHAPTER.name}"
    pasted = set(re.findall(r"\{glue:(?:text|md)\}`([a-z0-9_]+)", prose))
    pasted |= set(re.findall(r"```\{glue:figure\} ([a-z0-9_]+)", prose))
    glued = set(re.findall(r'glue\("([a-z0-9_]+)"', text))
    assert len(pasted) > 20 and pasted <= glued, f"pasted but never glued: {sorted(pasted - glued)}"


def test_torch_points_count_their_bytes_and_flops():
    calls = []
    pts = rl.measure_torch_points("NVIDIA H200", n=1024, mnk=64, device="cpu",
                                  time_fn=lambda fn: (calls.append(fn()), 0.5)[1])
    add, mm = pts
    assert len(calls) == 2 and add.ms == mm.ms == 0.5
    assert add.bytes == 3 * 1024 * 4 and add.flops == 1024
    assert mm.flops == 2 * 64**3 and mm.bytes == 3 * 64 * 64 * 2
    assert mm.intensity == pytest.approx(2 * 64 / 6) and add.hardware is H200
