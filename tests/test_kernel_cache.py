"""The build cache that lets the notebooks test reuse what the book build of the same session
compiled: off unless asked for, written by one side and read by the other, keyed by script."""

from __future__ import annotations

import sys

import pytest

import gpubook as gb
import kernels

B = sys.modules["gpubook.build"]


def refuse_to_compile(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("compiled although the cache holds this kernel")
    monkeypatch.setattr(B, "_build", fail)


def test_off_by_default_every_build_compiles(monkeypatch):
    monkeypatch.delenv(B.CACHE_ENV, raising=False)
    assert B.kernel_cache(kernels.vadd, (gb.BLACKWELL, gb.HOPPER)) is None
    calls = []
    real = B._build
    monkeypatch.setattr(B, "_build", lambda *a: calls.append(1) or real(*a))
    gb.build(kernels.vadd, name="vadd")
    gb.build(kernels.vadd, name="vadd")
    assert len(calls) == 2


def test_a_written_build_is_read_back_whole_without_compiling(tmp_path, monkeypatch):
    monkeypatch.setenv(B.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(B.CACHE_MODE_ENV, "write")
    built = gb.build(kernels.vadd, name="vadd", highlight=("ld.global",))
    assert len(list(tmp_path.glob("*.pickle"))) == 1
    monkeypatch.setenv(B.CACHE_MODE_ENV, "read")
    refuse_to_compile(monkeypatch)
    again = gb.build(kernels.vadd, name="vadd_again", highlight=("st.global",))
    assert again.name == "vadd_again" and again.highlight == ("st.global",)
    for f in B._CACHED_FIELDS:
        assert getattr(again, f) == getattr(built, f), f
    assert again.fingerprint == built.fingerprint and again.params == built.params
    assert again.facts() | {"name": "vadd"} == built.facts()
    assert again.summary().replace("vadd_again", "vadd") == built.summary()


def test_another_script_or_arch_request_is_not_served_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(B.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(B.CACHE_MODE_ENV, "write")
    gb.build(kernels.vadd, name="vadd")
    monkeypatch.setenv(B.CACHE_MODE_ENV, "read")
    assert B.kernel_cache(kernels.vadd_tail, (gb.BLACKWELL, gb.HOPPER)).path != \
        B.kernel_cache(kernels.vadd, (gb.BLACKWELL, gb.HOPPER)).path
    assert B.kernel_cache(kernels.vadd, (gb.BLACKWELL,)).path != \
        B.kernel_cache(kernels.vadd, (gb.BLACKWELL, gb.HOPPER)).path
    k = gb.build(kernels.vadd_tail, name="vadd_tail")      # a miss compiles ...
    assert k.ptx and k.cubin
    assert len(list(tmp_path.glob("*.pickle"))) == 1        # ... and a reader writes nothing


def test_the_writer_never_reads(tmp_path, monkeypatch):
    monkeypatch.setenv(B.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(B.CACHE_MODE_ENV, "write")
    gb.build(kernels.vadd, name="vadd")
    calls = []
    real = B._build
    monkeypatch.setattr(B, "_build", lambda *a: calls.append(1) or real(*a))
    gb.build(kernels.vadd, name="vadd")
    assert calls == [1]


def test_a_cache_without_a_mode_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(B.CACHE_ENV, str(tmp_path))
    monkeypatch.delenv(B.CACHE_MODE_ENV, raising=False)
    with pytest.raises(ValueError, match="read' or 'write"):
        gb.build(kernels.vadd, name="vadd")
