"""The build cache that lets the notebooks test reuse what the book build of the same session
compiled, and a local build reuse what the last one compiled: off unless asked for, keyed by
script; written by one side and read by the other, or both ("update", a local build)."""

from __future__ import annotations

import sys

import pytest

import gpubook as gb
import kernels

B = sys.modules["gpubook.compile.build"]


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
    with pytest.raises(ValueError, match="'read', 'write' or 'update'"):
        gb.build(kernels.vadd, name="vadd")


def test_an_updating_cache_compiles_a_miss_once_and_stores_it(tmp_path, monkeypatch):
    monkeypatch.setenv(B.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(B.CACHE_MODE_ENV, "update")
    built = gb.build(kernels.vadd, name="vadd")
    assert len(list(tmp_path.glob("*.pickle"))) == 1
    refuse_to_compile(monkeypatch)
    assert gb.build(kernels.vadd, name="vadd").cubin == built.cubin


@pytest.mark.parametrize("execution", ["cache", "force"])
def test_a_local_build_keeps_kernels_unless_forced(tmp_path, execution):
    import os
    import subprocess
    from pathlib import Path

    conf = Path(B.__file__).resolve().parents[2] / "conf.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBOOK_")}
    env.update(GPUBOOK_EXECUTION=execution, GPUBOOK_CACHE=str(tmp_path / "jc"))
    out = subprocess.run([sys.executable, "-c", "import os, runpy; runpy.run_path(%r); "
                          "print(os.environ.get('GPUBOOK_KERNEL_CACHE'), os.environ.get('GPUBOOK_KERNEL_CACHE_MODE'))"
                          % str(conf)], env=env, capture_output=True, text=True, check=True).stdout.split()
    if execution == "cache":
        assert out == [str(conf.parent / ".kernel_cache"), "update"]
    else:
        assert out == ["None", "None"]
