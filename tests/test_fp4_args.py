"""Packed E2M1 (FP4) operands through the harness, without a GPU or the simulator.

A kernel declares an E2M1 buffer as `T.Buffer((M, K), "float4_e2m1fn")`; a check passes it as a
`torch.float4_e2m1fn_x2` tensor of shape (M, K / 2), two elements to a byte, the element of
lower index in the low four bits. These tests follow that tensor through validation, the
kernel's own argument check (on a TVM view of its bytes), poisoning, comparison, stress
variants, the export, and the simulator's inputs and outputs.
"""

from __future__ import annotations

import json

import pytest
import torch

import gpubook as gb
from gpubook.compile.signature import KernelCallError, Param, validate
from gpubook.models import lowprec as lp
from gpubook.verify import compare as cmp
from gpubook.verify import simulate

A = Param("A", (4, 8), "float4_e2m1fn")
OUT = Param("out", (4, 8), "float4_e2m1fn")


def _e2m1(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    grid = torch.tensor(lp.E2M1.values() + [-v for v in lp.E2M1.values()])
    return grid[torch.randint(0, 16, shape, generator=g)]


def _packed(q):
    return lp.pack_e2m1(q).view(torch.float4_e2m1fn_x2)


def test_an_e2m1_parameter_takes_two_elements_to_a_byte():
    assert (A.torch_dtype, A.torch_shape, A.packed) == ("float4_e2m1fn_x2", (4, 4), 2)
    f32 = Param("x", (4, 8), "float32")
    assert (f32.torch_dtype, f32.torch_shape, f32.packed) == ("float32", (4, 8), 1)
    assert Param.from_json(A.to_json()) == A  # case.json keeps the kernel's own shape and dtype
    validate("k", [A], [_packed(_e2m1((4, 8)))], device=None)
    with pytest.raises(KernelCallError, match=r"has dtype uint8, but the kernel expects float4_e2m1fn_x2 "
                                              r"\(float4_e2m1fn\[4, 8\] is passed as float4_e2m1fn_x2 of shape \(4, 4\)"):
        validate("k", [A], [lp.pack_e2m1(_e2m1((4, 8)))], device=None)
    with pytest.raises(KernelCallError, match=r"has shape \(4, 8\), but the kernel was compiled for \(4, 4\)"):
        validate("k", [A], [torch.zeros(4, 8, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)], device=None)
    with pytest.raises(KernelCallError, match="multiple of 2"):
        Param("odd", (4, 7), "float4_e2m1fn").torch_shape


def test_packed_values_compare_by_value_and_poison_as_minus_six():
    q = _e2m1((4, 8), seed=1)
    t = _packed(q)
    assert torch.equal(cmp.as_float64(t), q.double())  # the low nibble is the first element
    assert cmp.compare("out", t, t.clone(), 0, 0) == (0.0, 0.0, 0.0)
    assert cmp.compare("out", t, q, 0, 0)[0] == 0.0  # a reference in float values compares too
    off = q.clone()
    off[2, 5] = 6.0 if q[2, 5] != 6.0 else -6.0
    with pytest.raises(cmp.CheckError, match=r"(?s)1 of 32 elements differ.*\(2, 5\)"):
        cmp.compare("out", _packed(off), t, 0, 0)
    p = torch.empty(4, 4, dtype=torch.float4_e2m1fn_x2)
    cmp._poison(p)
    assert bool((cmp.as_float64(p) == -6.0).all())


def test_stress_variants_shuffle_packed_bytes():
    t = _packed(_e2m1((4, 8), seed=2))
    s = cmp.shuffled(t, 5)
    assert s.dtype == torch.float4_e2m1fn_x2 and s.shape == t.shape
    assert sorted(s.view(torch.uint8).flatten().tolist()) == sorted(t.view(torch.uint8).flatten().tolist())
    assert not torch.equal(s.view(torch.uint8), t.view(torch.uint8))


def test_the_kernel_argument_check_accepts_the_view_of_the_bytes():
    """TVM's own argument check of a compiled kernel refuses the tensor as DLPack describes it
    (two-lane elements, half as many) and takes the view `runtime.kernel_args` makes; here, on a
    CPU tensor, the first thing it still refuses is the device."""
    import tvm
    from tvm.script import tirx as T

    from gpubook.compile.build import target
    from gpubook.run import runtime

    @T.prim_func
    def probe(A: T.Buffer((128, 64), "float4_e2m1fn"), D: T.Buffer((128,), "float32")):
        T.device_entry()
        _cta = T.cta_id([1])
        tid = T.thread_id([128])
        D[tid] = T.float32(1.0)

    fn = tvm.compile(tvm.IRModule({"main": probe}), target=target("sm_90a"), tir_pipeline="tirx")["main"]
    p = Param("A", (128, 64), "float4_e2m1fn")
    t = _packed(_e2m1((128, 64), seed=3))
    with pytest.raises(TypeError, match="Mismatched A.dtype"):
        fn(t, torch.zeros(128))
    (view, d) = runtime.kernel_args([p, Param("D", (128,), "float32")], [t, torch.zeros(128)])
    assert tuple(view.shape) == (128, 64) and str(view.dtype) == "float4_e2m1fn"
    assert view.data_ptr() == t.data_ptr()
    with pytest.raises(ValueError, match="Mismatched A.device_type"):
        fn(view, d)


def test_the_simulator_gets_bytes_and_gives_the_tensor_back(tmp_path):
    q = _e2m1((4, 8), seed=4)
    meta = {"params": [A.to_json(), OUT.to_json()], "outputs": [1]}
    simulate.write_inputs({"args": [_packed(q), None]}, meta, tmp_path)
    import numpy as np

    z = np.load(tmp_path / "inputs.npz")
    spec = json.loads((tmp_path / "inputs.json").read_text())
    assert spec == {"dtypes": {"A": "float4_e2m1fn", "out": "float4_e2m1fn"}, "outputs": ["out"]}
    assert z["A"].dtype == np.uint8 and z["A"].shape == (4, 4)
    assert z["A"].tolist() == lp.pack_e2m1(q).tolist()
    assert (z["out"] == cmp.PACKED_POISON).all()
    back = cmp.from_bytes(OUT, z["A"])
    assert back.dtype == torch.float4_e2m1fn_x2 and torch.equal(cmp.as_float64(back), q.double())
    rec = simulate.judge(dict(meta, tolerances=[[0.0, 0.0]]), {"numbers": {"verdict": "clean"}},
                         [_packed(q)], {"out": z["A"]})
    assert rec["status"] == "simulated" and rec["max_abs_error"] == 0.0
    rec = simulate.judge(dict(meta, tolerances=[[0.0, 0.0]]), {"numbers": {"verdict": "clean"}},
                         [_packed(q)], {"out": z["out"]})  # nothing written: the poison differs
    assert rec["status"] == "failed"


def test_a_check_exports_packed_operands(tmp_path, monkeypatch):
    """gb.check validates the packed tensor against the kernel's float4 parameter, and the case
    it exports carries it as it is: the replay hands it to the launcher unchanged."""
    from gpubook import export
    from gpubook.run import record

    class Kernel:
        name, fingerprint, runs_on = "k", "f", ()
        params = [A, Param("out", (4, 8), "float32")]

        def script(self):
            return ""

        def facts(self):
            return {}

    k = Kernel()
    q = _e2m1((4, 8), seed=6)
    case = gb.verify.check.prepare(k, [_packed(q), torch.empty(4, 8)], ref=lambda a, out: cmp.as_float64(a).float(),
                                   stress=3, variants=2)
    assert torch.equal(case.expected[0], q)
    assert case.variants[1][0][0].dtype == torch.float4_e2m1fn_x2
    monkeypatch.setenv(export.EXPORT_ENV, str(tmp_path))
    monkeypatch.setattr(record, "_write_common", lambda d, kernel, meta: (d / "case.json").write_text(json.dumps(meta)))
    d = case.record()
    data = torch.load(d / "tensors.pt")
    assert data["args"][0].dtype == torch.float4_e2m1fn_x2
    assert torch.equal(data["args"][0].view(torch.uint8), lp.pack_e2m1(q))
