"""The kernel harness on a machine without a GPU: compile reports, not-run output, strict mode,
bad calls, and the comparison that makes a wrong kernel fail the build."""

from __future__ import annotations

import shutil

import pytest
import torch

import gpubook as gb
from gpubook import runtime, toolchain
from gpubook.compile.signature import KernelCallError, Param, validate

import kernels
from gpu_stubs import fake_gpu, no_gpu, vadd  # noqa: F401 - fixtures


@pytest.fixture(params=["nvcc", "nvrtc"])
def compiler(request, monkeypatch):
    if request.param == "nvcc" and shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH (the NVRTC variant covers this machine)")
    monkeypatch.setenv("GPUBOOK_COMPILER", request.param)
    toolchain.compiler.cache_clear()
    yield request.param
    toolchain.compiler.cache_clear()


def test_compile_report_of_a_portable_kernel(compiler):
    k = gb.build(kernels.vadd, name="vadd")
    assert k.compiler == compiler
    assert k.arch == "sm_100a" and k.runs_on == ("sm_100a", "sm_90a")
    assert ".target sm_100a" in k.ptx
    assert k.cubin[:4] == b"\x7fELF"
    assert 0 < k.registers <= 32
    assert (k.static_smem, k.dynamic_smem, k.reserved_smem) == (0, 0, 0)
    assert k.local_bytes == 0 and k.spill_instructions == 0
    assert k.ptx_counts["ld.global"] == 2 and k.ptx_counts["st.global"] == 1
    assert k.ptx_counts["ld.global.v4"] == 0 and k.ptx_counts["tcgen05.mma"] == 0
    assert k.sass_counts.get("LDG") == 2 and k.sass_counts.get("STG") == 1
    (launch,) = k.launches
    assert (launch.grid, launch.block, launch.dyn_smem) == ((32,), (128,), 0)
    text = repr(k)
    assert "compiled for sm_100a (+sm_90a)" in text and "ld.global 2" in text
    assert 'data-runs-on="sm_100a sm_90a"' in k._repr_html_()
    assert [p.describe() for p in k.params] == [
        "x: float32[4096]", "y: float32[4096]", "out: float32[4096]"]


def test_compile_report_of_a_blackwell_only_kernel(compiler):
    k = gb.build(kernels.tmem_roundtrip, name="tmem", highlight=("tcgen05.mma",))
    assert k.runs_on == ("sm_100a",)
    assert k.ptx_counts["tcgen05.alloc"] == 1
    assert k.static_smem == 4 and k.reserved_smem == 1024
    assert "compiled for sm_100a only" in repr(k)
    assert "tcgen05.mma 0" in repr(k)  # highlighted even though absent


def test_fingerprint_is_stable_and_tracks_the_script(vadd):
    again = gb.build(kernels.vadd, name="vadd")
    assert again.fingerprint == vadd.fingerprint
    assert gb.build(kernels.tmem_roundtrip).fingerprint != vadd.fingerprint


def args_for_vadd():
    n = kernels.N
    return [gb.seeded((n,), seed=1), gb.seeded((n,), seed=2), torch.empty(n)]


def test_not_run_output_without_a_gpu(vadd):
    res = gb.check(vadd, args_for_vadd(), ref=lambda x, y, out: x + y)
    assert res.status == "not run" and not res.passed
    text = repr(res)
    assert text.startswith("NOT RUN vadd: no GPU on this machine (compiled for sm_100a or sm_90a)")
    assert "PASS" not in text
    assert "12 regs" in text or "regs" in text


def test_not_run_on_a_gpu_of_the_wrong_arch(monkeypatch):
    monkeypatch.setattr(toolchain, "local_arch", lambda: "sm_90a")
    k = gb.build(kernels.tmem_roundtrip, name="tmem")
    res = gb.check(k, [torch.empty(128, dtype=torch.int32)], ref=lambda out: torch.zeros(128, dtype=torch.int32))
    assert res.status == "not run"
    assert repr(res).startswith("NOT RUN tmem: this GPU is sm_90a (compiled for sm_100a)")


def test_strict_switch_turns_not_run_into_an_error(vadd, monkeypatch):
    monkeypatch.setenv("GPUBOOK_STRICT", "1")
    with pytest.raises(gb.NotRunError, match="GPUBOOK_STRICT is set and vadd did not run"):
        gb.check(vadd, args_for_vadd(), ref=lambda x, y, out: x + y)


@pytest.mark.parametrize("make_args, message", [
    (lambda a: a[:2], r"vadd takes 3 tensors, got 2"),
    (lambda a: [a[0][:100], a[1], a[2]], r"argument 0 \('x'\) of vadd has shape \(100,\), but the kernel was compiled for \(4096,\)"),
    (lambda a: [a[0].double(), a[1], a[2]], r"argument 0 \('x'\) of vadd has dtype float64, but the kernel expects float32"),
    (lambda a: [a[0], torch.empty(2 * kernels.N)[::2], a[2]], r"argument 1 \('y'\) of vadd is not contiguous"),
    (lambda a: [a[0], a[1], 3.0], r"argument 2 \('out'\) of vadd must be a tensor, got float"),
])
def test_bad_calls_are_rejected_before_any_launch(vadd, make_args, message):
    with pytest.raises(KernelCallError, match=message):
        gb.check(vadd, make_args(args_for_vadd()), ref=lambda *a: a[0])


def test_tensors_on_the_wrong_device_are_rejected_before_the_launch():
    launched = []
    params = [Param("x", (4,), "float32")]
    launcher = runtime.Launcher(lambda *a: launched.append(a), "k", params, "sm_90a")
    with pytest.raises(KernelCallError, match=r"argument 0 \('x'\) of k is on cpu, but the kernel runs on the GPU"):
        launcher(torch.zeros(4))
    assert launched == []
    validate("k", params, [torch.zeros(4)], device=None)  # fine while preparing on the CPU


def test_compare_raises_on_a_planted_mismatch():
    ref = gb.seeded((8, 16), seed=5)
    out = ref.clone()
    out[3, 7] += 0.5
    with pytest.raises(gb.CheckError) as err:
        gb.compare("k", out, ref, *gb.tolerance("float32"))
    msg = str(err.value)
    assert "1 of 128 elements differ" in msg and "max abs error 0.5" in msg and "(3, 7)" in msg


def test_compare_rejects_nan_and_accepts_rounding():
    ref = torch.ones(4)
    with pytest.raises(gb.CheckError, match="got nan"):
        gb.compare("k", torch.tensor([1.0, float("nan"), 1.0, 1.0]), ref, 1e-3, 1e-3)
    err = gb.compare("k", ref + 1e-7, ref, *gb.tolerance("float32"))
    assert err[0] == pytest.approx(1e-7, rel=0.2)
    # over the whole allowance, atol + rtol |ref| = 1e-5 + 1.3e-6: about 0.9% of it
    assert err.max_error_over_allowed == pytest.approx(1e-7 / (1e-5 + 1.3e-6), rel=0.2)
    with pytest.raises(gb.CheckError):
        gb.compare("k", torch.tensor([1, 2, 4]), torch.tensor([1, 2, 3]), *gb.tolerance("int32"))


def test_the_error_is_weighed_against_the_whole_allowance_elementwise():
    """The largest |err| / (atol + rtol |ref|) over the elements, not |err| against atol: an error
    above atol that the rtol part allows is inside its allowance, and the worst element is the
    one nearest its own bound, not the one of the largest absolute error."""
    ref = torch.tensor([1000.0, 1.0, 0.0])
    out = ref + torch.tensor([0.5, 0.0008, 0.0])        # 0.5 > atol, yet within 1e-3 * 1000
    err = gb.compare("k", out, ref, 1e-3, 1e-4)
    assert err.max_abs_error == pytest.approx(0.5, rel=1e-6)
    assert err.max_error_over_allowed == pytest.approx(0.0008 / (1e-4 + 1e-3), rel=1e-4)  # the 2nd element
    assert gb.compare("k", ref, ref, 0.0, 0.0).max_error_over_allowed == 0.0  # exact with no allowance
    with pytest.raises(gb.CheckError, match=r"the worst element is 2\.1 times its allowance"):
        gb.compare("k", ref + torch.tensor([0.0, 0.0, 2.1e-4]), ref, 1e-3, 1e-4)


def test_tolerances_by_dtype():
    assert gb.tolerance("float16") == (1e-3, 1e-5)
    assert gb.tolerance("bfloat16") == (1.6e-2, 1e-5)
    assert gb.tolerance("int32") == (0.0, 0.0)
    assert gb.tolerance("float32", atol=1e-3) == (1.3e-6, 1e-3)


def test_check_passes_a_correct_kernel(vadd, monkeypatch):
    fake_gpu(monkeypatch, lambda x, y, out: out.copy_(x + y))
    res = gb.check(vadd, args_for_vadd(), ref=lambda x, y, out: x + y)
    assert res.passed and repr(res).startswith("PASSED vadd here, on an H200 (sm_90a): max error 0 (exact)")
    assert res.max_abs_error == 0.0 and res.max_error_over_allowed == 0.0


def test_check_fails_a_wrong_kernel(vadd, monkeypatch):
    def off_by_one_tail(x, y, out):
        out.copy_(x + y)
        out[-1] = 0.0

    fake_gpu(monkeypatch, off_by_one_tail)
    with pytest.raises(gb.CheckError, match=r"(?s)1 of 4096 elements differ.*\(4095,\): got 0"):
        gb.check(vadd, args_for_vadd(), ref=lambda x, y, out: x + y)


def test_check_fails_a_kernel_that_writes_nothing(vadd, monkeypatch):
    fake_gpu(monkeypatch, lambda x, y, out: None)  # the poisoned output stays NaN
    with pytest.raises(gb.CheckError, match="4096 of 4096 elements differ"):
        gb.check(vadd, args_for_vadd(), ref=lambda x, y, out: x + y)


def test_hardware_table_matches_its_sources():
    assert gb.B200.sms == 148 and gb.H200.sms == 132 and gb.H100.sms == 132
    assert gb.B200.bf16_flops == 2250e12 and gb.H200.bf16_flops == 989e12
    assert gb.B200.fp8_flops == 4500e12 and gb.H200.fp8_flops == 1979e12
    assert gb.B200.hbm_bandwidth == 8.0e12 and gb.H200.hbm_bandwidth == 4.8e12
    assert gb.H100.hbm_bandwidth == 3.35e12
    assert gb.B200.tmem_per_sm == 128 * 512 * 4 and gb.H200.tmem_per_sm == 0
    assert gb.H200.l2_bytes == 62_914_560 and gb.H100.l2_bytes == 50e6 and gb.B200.l2_bytes == 126e6
    assert round(gb.B200.ridge_bf16) == 281 and round(gb.H200.ridge_bf16) == 206
    assert round(gb.B200.tensor_clock_hz / 1e9, 2) == 1.86
    assert round(gb.H200.tensor_clock_hz / 1e9, 2) == round(gb.H100.tensor_clock_hz / 1e9, 2) == 1.83


def test_fp32_and_sfu_peaks_follow_the_per_sm_rates():
    for g in gb.GPUS.values():
        assert g.fp32_lanes_per_sm == 128 and g.sfu_per_sm == 16
        assert g.fp32_flops == pytest.approx(g.sms * 128 * 2 * g.tensor_clock_hz)
        assert g.sfu_rate == pytest.approx(g.sms * 16 * g.tensor_clock_hz)
    assert round(gb.B200.fp32_flops / 1e12) == 70 and round(gb.B200.sfu_rate / 1e12, 1) == 4.4
    assert gb.B200.peak_flops("bfloat16") == gb.B200.peak_flops("float16") == 2250e12
    assert gb.B200.peak_flops("float8_e4m3fn") == 4500e12 and gb.H200.peak_flops("fp8") == 1979e12
    assert gb.H200.peak_flops("float32") == gb.H200.fp32_flops
    with pytest.raises(ValueError, match="no peak in the hardware table for dtype 'tf32'"):
        gb.H200.peak_flops("tf32")


@pytest.mark.parametrize("name, gpu", [
    ("NVIDIA B200", "B200"), ("NVIDIA H200", "H200"), ("NVIDIA H100 80GB HBM3", "H100"),
    ("B200", "B200"), ("H200", "H200"), ("H100", "H100"),
])
def test_gpus_are_found_by_exact_name(name, gpu):
    assert gb.gpu_for(name) is gb.GPUS[gpu]


@pytest.mark.parametrize("name", [
    "NVIDIA GB200", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H20", "NVIDIA H200 NVL",
    "NVIDIA B200 something", "NVIDIA GeForce RTX 5090",
])
def test_variants_are_refused_with_the_known_names(name):
    with pytest.raises(KeyError) as err:
        gb.gpu_for(name)
    msg = str(err.value)
    assert f"no entry for {name!r}" in msg
    assert "'NVIDIA B200'" in msg and "'NVIDIA H200'" in msg and "'NVIDIA H100 80GB HBM3'" in msg


def test_percent_of_peak_uses_the_peak_of_the_dtype():
    t = gb.Timing("k", "measured", gpu="NVIDIA H200", ms=1.0, flops=989e9, dtype="bfloat16")
    assert t.percent_of_peak() == pytest.approx(100) and t.peak_label() == "bf16/fp16 tensor"
    t8 = gb.Timing("k", "measured", gpu="NVIDIA H200", ms=1.0, flops=989e9, dtype="float8_e4m3fn")
    assert t8.percent_of_peak() == pytest.approx(100 * 989 / 1979)
    t32 = gb.Timing("k", "measured", gpu="NVIDIA H200", ms=1.0, flops=gb.H200.fp32_flops / 2e3,
                    dtype="float32")
    assert t32.percent_of_peak() == pytest.approx(50) and "50% of FP32 peak" in repr(t32)
    # bytes and FLOPs: the roof that binds (the larger percentage)
    both = gb.Timing("k", "measured", gpu="NVIDIA H200", ms=1.0, bytes=2.4e9, flops=1e9, dtype="float32")
    assert both.percent_of_peak() == pytest.approx(50) and both.peak_label() == "HBM"
    with pytest.raises(KeyError, match="GB200"):
        gb.Timing("k", "measured", gpu="NVIDIA GB200", ms=1.0, bytes=1e9).percent_of_peak()


def test_bench_counts_flops_in_the_kernels_narrowest_float_dtype():
    from gpubook.run.bench import flop_dtype

    P = gb.Param
    assert flop_dtype([P("a", (4,), "float16"), P("d", (4,), "float32")]) == "float16"
    assert flop_dtype([P("a", (4,), "float8_e4m3fn"), P("b", (4,), "bfloat16")]) == "float8_e4m3fn"
    assert flop_dtype([P("x", (4,), "float32"), P("i", (4,), "int32")]) == "float32"
    assert flop_dtype([P("i", (4,), "int32")]) is None


def test_the_read_flush_reads_a_buffer_larger_than_any_l2():
    from gpubook.run.bench import FLUSH_BYTES, flusher

    assert FLUSH_BYTES >= 2 * max(g.l2_bytes for g in gb.GPUS.values())
    read = flusher("read", 1 << 20, "cpu")
    assert read() is not None  # a reduction into a preallocated scalar
    assert flusher("none", 1 << 20, "cpu")() is None
    write = flusher("write", 1 << 20, "cpu")
    assert write().abs().sum() == 0 and write().numel() == (1 << 20) // 4
    with pytest.raises(ValueError, match="flush must be one of read, write, none"):
        flusher("zero")
    with pytest.raises(ValueError, match="flush must be one of"):
        gb.bench(gb.build(kernels.vadd, name="vadd"), bytes=1, flush="cold")


def test_ptx_counts_see_labelled_and_predicated_instructions():
    from gpubook.compile.report import count_ptx

    ptx = """
$L__BB0_2: bar.sync 0;
$L__BB0_3:
	bar.sync 	0;
	@!%p1 bar.sync 1;
	{ .reg .pred p; setp.eq.u32 p, %r1, 0; @p tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r2]; }
	{
	.reg .pred P1;
	LAB_WAIT:
	mbarrier.try_wait.parity.shared::cta.b64 P1, [%r3], %r4;
	@!P1 bra LAB_WAIT;
	}
	/* ld.global.f32 %f1, [%rd1]; */ ld.global.f32 %f2, [%rd2];
	cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r5], [%rd3, {%r6, %r7}], [%r8];
	ld.shared.v2.f32 {%f3, %f4}, [%r9];
"""
    c = count_ptx(ptx)
    assert c["bar.sync"] == 3
    assert c["tcgen05.commit"] == 1 and c["mbarrier wait"] == 1
    assert c["ld.global"] == 1 and c["TMA load"] == 1 and c["ld.shared"] == 1


def test_ptx_counts_find_instructions_inside_inline_asm_blocks():
    from gpubook.compile.report import count_ptx

    ptx = """
	{ .reg .pred p; setp.ne.b32 p, %r1, 0; tcgen05.mma.cta_group::1.kind::f16 [%r2], %rd1, %rd2, %r3, p; }
	@%p1 bra $L__BB0_2;
	ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd5];
	// tcgen05.mma in a comment does not count
	ld.global.f32 %f5, [%rd6];
"""
    c = count_ptx(ptx)
    assert c["tcgen05.mma"] == 1 and c["ld.global.v4"] == 1 and c["ld.global"] == 1


def test_a_portable_kernel_also_compiles_for_the_local_gpu(monkeypatch):
    monkeypatch.setattr(toolchain, "local_arch", lambda: "sm_89")
    k = gb.build(kernels.vadd, name="vadd")
    assert k.runs_on == ("sm_100a", "sm_90a", "sm_89")
    assert gb.build(kernels.tmem_roundtrip).runs_on == ("sm_100a",)


def test_a_hopper_only_kernel_builds_for_sm_90a_and_records_why_not_sm_100a(compiler):
    k = gb.build(kernels.wgmma_fence, name="wgmma_fence", archs=(gb.HOPPER,))
    assert k.arch == "sm_90a" and k.runs_on == ("sm_90a",)
    assert ".target sm_90a" in k.ptx and k.cubin[:4] == b"\x7fELF"
    why = k.not_built["sm_100a"]
    assert why.startswith("ptxas: Instruction 'wgmma.fence' not supported on .target 'sm_100a'")
    assert f"compiled for sm_90a only (sm_100a: not built — {why})" in k.summary()
    assert k.facts()["not_built"] == {"sm_100a": why} and k.facts()["arch"] == "sm_90a"
    assert 'data-runs-on="sm_90a"' in k._repr_html_()
    assert len(k.fingerprint) == 16 and k.registers > 0


def test_a_hopper_only_kernel_without_archs_says_how_to_build_it():
    with pytest.raises(RuntimeError, match=r"(?s)does not build for sm_100a: ptxas: Instruction "
                       r"'wgmma\.fence'.*archs=\(gb\.HOPPER,\)"):
        gb.build(kernels.wgmma_fence, name="wgmma_fence")


def test_archs_cannot_hide_a_build_that_works():
    with pytest.raises(ValueError, match="assembles for sm_100a too"):
        gb.build(kernels.vadd, name="vadd", archs=(gb.HOPPER,))
    with pytest.raises(ValueError, match="cannot build for sm_90a: it uses tcgen05"):
        gb.build(kernels.tmem_roundtrip, archs=(gb.BLACKWELL, gb.HOPPER))
    with pytest.raises(ValueError, match="archs must name"):
        gb.build(kernels.vadd, archs=("sm_80",))
    k = gb.build(kernels.vadd, name="vadd", archs=(gb.BLACKWELL,))
    assert k.runs_on == ("sm_100a",) and k.not_built == {"sm_90a": "not requested (archs=('sm_100a',))"}


def test_a_blackwell_only_kernel_says_why_it_has_no_sm_90a_build():
    k = gb.build(kernels.tmem_roundtrip, name="tmem")
    assert k.not_built == {"sm_90a": "Blackwell-only PTX: tcgen05 (sm_100a)"}
    assert "sm_90a: not built — Blackwell-only PTX: tcgen05 (sm_100a)" in repr(k)


def test_a_hopper_only_kernel_is_checked_on_an_sm_90a_gpu(monkeypatch):
    hk = gb.build(kernels.wgmma_fence, name="wgmma_fence", archs=(gb.HOPPER,))
    fake_gpu(monkeypatch, lambda out: out.copy_(torch.arange(128, dtype=torch.int32)))
    res = gb.check(hk, [torch.empty(128, dtype=torch.int32)], ref=lambda out: torch.arange(128, dtype=torch.int32))
    assert res.passed and res.arch == "sm_90a"
    monkeypatch.setattr(toolchain, "local_arch", lambda: "sm_100a")
    res = gb.check(hk, [torch.empty(128, dtype=torch.int32)], ref=lambda out: torch.arange(128, dtype=torch.int32))
    assert repr(res).startswith("NOT RUN wgmma_fence: this GPU is sm_100a (compiled for sm_90a)")


def test_first_error_line_of_a_compiler():
    text = ("k.cu(79): warning #177-D: variable \"tid\" was declared but never referenced\n"
            "ptxas /tmp/x.ptx, line 30; error   : Instruction 'wgmma.fence' not supported on .target 'sm_100a'\n"
            "ptxas fatal   : Ptx assembly aborted due to errors\n")
    assert toolchain.first_error(text) == "ptxas: Instruction 'wgmma.fence' not supported on .target 'sm_100a'"
    assert toolchain.first_error("k.cu(3): error: identifier \"x\" is undefined") == \
        "error: identifier \"x\" is undefined"


def test_one_compilation_yields_the_ptx_and_cubin_of_two(monkeypatch):
    """The PTX and cubin of one run (nvcc -keep, or one NVRTC program) are those of two runs."""
    import sys as _sys

    build_mod = _sys.modules["gpubook.compile.build"]
    src = build_mod._compile(kernels.vadd_tail, gb.BLACKWELL).mod.imports[0].inspect_source()
    if shutil.which("nvcc"):
        ptx, cubin = toolchain._nvcc_both(src, gb.BLACKWELL)
        assert ptx == toolchain._nvcc(src, gb.BLACKWELL, "ptx") and cubin == toolchain._nvcc(src, gb.BLACKWELL, "cubin")
    monkeypatch.setenv(toolchain.VERIFY_ENV, "1")     # and NVRTC's program is TVM's, byte for byte
    toolchain._compiled.clear()
    ptx, cubin = toolchain.compile_both(src, gb.BLACKWELL, "nvrtc")
    assert b".visible .entry" in ptx and cubin[:4] == b"\x7fELF"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH: nothing to compare NVRTC with")
def test_nvcc_and_nvrtc_build_kernels_with_the_same_resources(monkeypatch):
    """Both compilers are given the same ptxas options and declarations, so a kernel's registers,
    shared memory and spills do not depend on which one a reader has: a Hopper wgmma kernel, a
    TMA kernel (a tensor map parameter, 128-byte aligned in both programs) and a portable one."""
    import sim_kernels

    def facts(using):
        monkeypatch.setenv("GPUBOOK_COMPILER", using)
        toolchain.compiler.cache_clear()
        out = []
        for func, archs in ((kernels.wgmma_fence, (gb.HOPPER,)), (sim_kernels.make_tma_gemm(), None),
                            (kernels.vadd_tail, None)):
            k = gb.build(func, archs=archs)
            assert k.compiler == using
            out.append((k.arch, k.registers, k.static_smem, k.dynamic_smem, k.local_bytes,
                        k.spill_instructions, k.sass_counts.get("STL", 0)))
        return out

    try:
        assert facts("nvcc") == facts("nvrtc")
    finally:
        toolchain.compiler.cache_clear()
    assert "--register-usage-level=5" in toolchain.PTXAS_FLAGS
    assert "--ptxas-options=--register-usage-level=5" in toolchain.nvrtc_options(gb.BLACKWELL, pch=False)


def test_a_hopper_only_kernel_is_refused_for_blackwell_as_its_first_instruction_is(compiler):
    """The recorded reason comes from the kernel's first Hopper-only instruction assembled alone;
    it is the first error line that assembling the whole kernel for sm_100a gives."""
    import sys as _sys

    build_mod = _sys.modules["gpubook.compile.build"]
    k = gb.build(kernels.wgmma_fence, archs=(gb.HOPPER,))
    probe = build_mod.hopper_refusal(k.ptx, compiler)
    assert probe is not None
    src = build_mod._compile(kernels.wgmma_fence, gb.BLACKWELL).mod.imports[0].inspect_source()
    with pytest.raises(RuntimeError) as whole:
        toolchain.compile_both(src, gb.BLACKWELL, compiler)
    assert toolchain.first_error(str(probe)) == toolchain.first_error(str(whole.value)) \
        == k.not_built[gb.BLACKWELL]
    # a kernel whose first Hopper-only instruction takes operands is tried whole
    assert build_mod.hopper_refusal("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%f1}, %rd1, %rd2, 1;", compiler) is None
    assert build_mod.hopper_refusal("add.s32 %r1, %r2, %r3;", compiler) is None
