"""Guard zones: a write past either end of a tensor argument fails the check, naming the
argument, the side and the offset; the self-test export carries an off-by-one kernel that the
replay on a GPU must see fail."""

from __future__ import annotations

import json

import pytest
import torch

import gpubook as gb
from gpubook import export, guard, replay, runtime

import kernels
from gpu_stubs import fake_gpu, no_gpu  # noqa: F401 - fixtures

NT = kernels.NT


def beyond(t: torch.Tensor, extra: int) -> torch.Tensor:
    """A flat view of `t` that reaches `extra` elements past its end (into its guard zone)."""
    return torch.as_strided(t, (t.numel() + extra,), (1,), t.storage_offset())


def before(t: torch.Tensor, extra: int) -> torch.Tensor:
    """A flat view that starts `extra` elements before `t`."""
    return torch.as_strided(t, (t.numel() + extra,), (1,), t.storage_offset() - extra)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int8,
                                   torch.int32, torch.float64, torch.uint8])
def test_an_intact_guard_zone_passes_for_any_dtype(dtype):
    t = torch.arange(37).to(dtype).reshape(37)
    g = guard.guarded_copy("x", t, "cpu")
    assert torch.equal(g.view, t) and g.view.is_contiguous()
    assert g.view.data_ptr() - g.base.data_ptr() == guard.GUARD_BYTES
    assert guard.violations(g) == []
    g.view.fill_(0)  # writing the whole tensor touches no sentinel
    g.view.view(-1)[-1] = 1
    assert guard.violations(g) == []


def test_the_sentinel_is_a_signalling_nan_in_float32():
    g = guard.allocate("x", (4,), "float32", "cpu")
    word = g.before()[:4].view(torch.int32).item() & 0xFFFFFFFF
    assert word == 0x7FB5A5A5
    assert torch.isnan(g.before()[:4].view(torch.float32)).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8, torch.float64])
def test_a_write_after_the_end_names_the_argument_side_and_offset(dtype):
    g = guard.allocate("out", (NT,), dtype, "cpu")
    es = g.view.element_size()
    g.base[guard.GUARD_BYTES + NT * es] = 0  # one byte of element NT, through the base
    (msg,) = guard.violations(g)
    assert msg == f"wrote 1 element after out (first at flat index {NT}, 0 bytes past its end)"
    g.base[guard.GUARD_BYTES + (NT + 3) * es] = 0
    (msg,) = guard.violations(g)
    assert msg.startswith("wrote 2 elements after out (first at flat index")


def test_a_write_before_the_start_is_reported_too():
    g = guard.guarded_copy("x", torch.zeros(3, 5), "cpu")
    before(g.view, 2)[0] = 7.0  # element -2
    (msg,) = guard.violations(g)
    assert msg == "wrote 1 element before x (first at flat index -2, 8 bytes before its start)"
    g.base[0] = 1  # the far end of the margin
    assert guard.violations(g)[0].startswith("wrote 2 elements before x (first at flat index -2")


def test_writing_the_poison_or_zero_into_the_margin_is_seen():
    for value in (0.0, float("nan"), 1.0, -1.0):
        g = guard.allocate("o", (8,), "float32", "cpu")
        beyond(g.view, 1)[8] = value
        assert guard.violations(g), value


def test_the_off_by_one_kernel_compiles_with_its_wrong_tail_guard():
    k = gb.build(kernels.vadd_off_by_one, name="vadd_off_by_one")
    assert "<= 1000" in k.source  # the bug the guard zone must catch is really in the kernel
    assert k.runs_on == ("sm_100a", "sm_90a")


def vadd_args():
    return [gb.seeded((NT,), seed=1), gb.seeded((NT,), seed=2), torch.empty(NT)]


def off_by_one(x, y, out):
    """What vadd_off_by_one does: x[NT] and y[NT] are read from their guard zones too."""
    beyond(out, 1).copy_(beyond(x, 1) + beyond(y, 1))


def test_check_fails_an_off_by_one_write_that_the_comparison_misses(monkeypatch):
    k = gb.build(kernels.vadd_off_by_one, name="vadd_off_by_one")
    fake_gpu(monkeypatch, off_by_one)
    with pytest.raises(gb.CheckError) as err:
        gb.check(k, vadd_args(), ref=lambda x, y, out: x + y)
    msg = str(err.value)
    assert msg == ("vadd_off_by_one: out-of-bounds write: wrote 1 element after out "
                   f"(first at flat index {NT}, 0 bytes past its end)")
    assert "differ" not in msg  # the comparison alone passes


def test_check_passes_the_correct_tail(monkeypatch):
    k = gb.build(kernels.vadd_tail, name="vadd_tail")
    fake_gpu(monkeypatch, lambda x, y, out: out.copy_(x + y))
    assert gb.check(k, vadd_args(), ref=lambda x, y, out: x + y).passed


def test_a_stress_run_reports_an_out_of_bounds_write(monkeypatch):
    k = gb.build(kernels.vadd_tail, name="vadd_tail")
    calls = []

    def rarely_off(x, y, out):
        calls.append(1)
        out.copy_(x + y)
        if len(calls) == 50:
            beyond(out, 2)[NT + 1] = 0.0

    fake_gpu(monkeypatch, rarely_off)
    with pytest.raises(gb.CheckError) as err:
        gb.check(k, vadd_args(), ref=lambda x, y, out: x + y, stress=100)
    st = err.value.stress
    assert st["failures"] == 0
    assert st["out_of_bounds"] == [f"wrote 1 element after out (first at flat index {NT + 1}, 4 bytes past its end)"]


def test_the_selftest_export_carries_the_off_by_one_case(tmp_path, monkeypatch):
    assert export.export_selftest(tmp_path) == 0
    cases = tmp_path / "cases"
    names = sorted(p.name for p in cases.iterdir())
    assert names == ["selftest--vadd_off_by_one--check", "selftest--vadd_tail--check",
                     "selftest--vadd_tail_flush_none--perf", "selftest--vadd_tail_flush_read--perf",
                     "selftest--vadd_tail_flush_write--perf"]
    wrong = cases / "selftest--vadd_off_by_one--check"
    meta = json.loads((wrong / "case.json").read_text())
    assert meta["expect"] == "fail" and meta["expect_message"] == "wrote 1 element after out"
    assert "if bx * 128 + tx <= 1000:" in (wrong / "kernel.py").read_text()
    assert json.loads((cases / "selftest--vadd_tail--check" / "case.json").read_text())["stress"] == 200
    flushes = {json.loads((cases / f"selftest--vadd_tail_flush_{f}--perf" / "case.json").read_text())["flush"]
               for f in ("read", "write", "none")}
    assert flushes == {"read", "write", "none"}
    assert export.current_chapter() == "unknown" and "GPUBOOK_EXPORT_DIR" not in __import__("os").environ

    # replayed: the off-by-one must fail, and that is what the self-test expects
    fake_gpu(monkeypatch, off_by_one)
    rec = replay.run_case(wrong)
    assert rec["status"] == "failed as expected"
    assert "wrote 1 element after out" in rec["message"]
    assert replay.exit_code([rec]) == 0
    assert replay._line(rec).lstrip().startswith("FAILED AS EXPECTED")

    # a harness that stopped catching it makes the replay fail
    fake_gpu(monkeypatch, lambda x, y, out: out.copy_(x + y))
    rec = replay.run_case(wrong)
    assert rec["status"] == "passed unexpectedly" and replay.exit_code([rec]) == 1

    rec = replay.run_case(cases / "selftest--vadd_tail--check")
    assert rec["status"] == "passed" and rec["stress"]["failures"] == 0 and rec["stress"]["launches"] == 200
