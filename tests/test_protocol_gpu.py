"""The measurement protocol on a GPU: host time stays out of the timed interval (the launch is
queued before the start event), so two wrappers of one library kernel time alike."""

import pytest
import torch

from gpubook.facts import stats
from gpubook.run import bench

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _bare_and_wrapped():
    """A 2048³ bf16 matmul launched bare, and through a wrapper that first spends 200 µs on the host."""
    import time

    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(a)

    def bare():
        torch.matmul(a, a, out=out)

    def wrapped():
        t = time.perf_counter()
        while time.perf_counter() - t < 200e-6:
            pass
        torch.matmul(a, a, out=out)

    return bare, wrapped


@needs_gpu
def test_host_work_before_a_launch_is_not_timed():
    """A wrapper that spends 200 µs on the host before it launches times like the bare launch:
    the spin keeps the GPU busy until the launch is queued."""
    bare, slow_wrapper = _bare_and_wrapped()
    report = {}
    times = bench.time_interleaved({"bare": bare, "wrapped": slow_wrapper}, warmup=5, repeat=60, report=report)
    c = stats.compare(times["bare"], times["wrapped"])
    assert report["host_bound"] == {"bare": 0, "wrapped": 0}
    # without the spin the wrapper's 200 µs land in the interval (the test below: over 1.5×);
    # with it, what is left is the GPU's own jitter around a 30 µs kernel
    assert abs(c.ratio.median - 1) < 0.03, c.phrase()


@needs_gpu
def test_the_forced_and_the_default_cudnn_attention_time_alike():
    """The same library kernel through two wrappers (the cuDNN backend forced, and SDPA's own
    dispatch where it picks cuDNN) times alike once the launch is queued before the interval."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (torch.randn(2, 16, 2048, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    def forced():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    def default():
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    times = bench.time_interleaved({"forced": forced, "default": default}, warmup=5, repeat=60)
    c = stats.compare(times["forced"], times["default"])
    assert abs(c.ratio.median - 1) < 0.03, c.phrase()


@needs_gpu
def test_without_the_spin_the_wrappers_host_time_is_timed(monkeypatch):
    """The same pair with the spin taken out: the GPU reaches the start event while the host is
    still in the wrapper, and the wrapper's time lands inside the interval. This is what the
    spin prevents, and why the test above can fail."""
    from gpubook.run import timer

    monkeypatch.setattr(timer.Spin, "__call__", lambda self: None)
    monkeypatch.setattr(timer.Spin, "longer", lambda self: False)
    bare, slow_wrapper = _bare_and_wrapped()
    report = {}
    times = bench.time_interleaved({"bare": bare, "wrapped": slow_wrapper}, warmup=5, repeat=60, report=report)
    c = stats.compare(times["bare"], times["wrapped"])
    assert c.verdict == "faster" and c.ratio.median > 1.5, c.phrase()
    assert report["host_bound"]["wrapped"] > 0
