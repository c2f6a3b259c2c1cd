"""Every Blackwell-only kernel the book builds keeps the PTX ordering rules of `gpubook.lint`.

A Blackwell kernel meets a B200 only after it is written, so the rules are checked on the
PTX of every such kernel that a chapter builds: a `tcgen05.ld` waited for before its
registers are used, generic stores fenced before an async-proxy read, `after_thread_sync`
after each synchronisation that precedes tcgen05 work, TMEM freed after a fence and a
barrier, mbarrier initialisation fenced and, for barriers other CTAs arrive on, published
by a cluster barrier. A kernel that a chapter shows broken on purpose declares the rules it
breaks when it is built (`gb.build(..., breaks=(...))`), and the build asserts exactly those.

The chapter runs re-execute every Blackwell chapter (tens of minutes on two cores), while the
book build already runs each chapter's own `lint.lint` assertions on its kernels; so they run
only when `GPUBOOK_SLOW=1` is set: `GPUBOOK_SLOW=1 python -m pytest tests/test_blackwell_rules.py
-k 06` checks one chapter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import blackwell_rules  # noqa: E402

ROOT = blackwell_rules.ROOT
CHAPTERS = blackwell_rules.blackwell_chapters()


def _run(chapter: Path) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("GPUBOOK_STRICT", None)           # without a B200, NOT RUN is the honest answer
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("blackwell_rules.py")), str(chapter)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, f"{chapter.name} did not run:\n{(proc.stdout + proc.stderr)[-4000:]}"
    return [json.loads(ln.split(" ", 1)[1]) for ln in proc.stdout.splitlines()
            if ln.startswith("BLACKWELL-KERNEL ")]


def test_the_chapters_with_blackwell_kernels_are_found():
    names = {p.stem for p in CHAPTERS}
    assert {"03-meet-tirx", "06-tensor-cores-tmem", "07-persistent-clc", "C-tirx-reference"} <= names, names
    assert not {"01-execution-model", "02-roofline"} & names, names


@pytest.mark.book
@pytest.mark.skipif(not os.environ.get("GPUBOOK_SLOW"),
                    reason="re-executes the Blackwell chapters; set GPUBOOK_SLOW=1")
@pytest.mark.parametrize("chapter", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_blackwell_kernel_keeps_the_ordering_rules(chapter):
    kernels = _run(chapter)
    assert kernels, f"{chapter.name} has Blackwell code but built no Blackwell-only kernel"
    broken = [k for k in kernels if k["findings"] and not k["shown_broken"]]
    assert not broken, "\n".join(f"{k['name']}:\n  " + "\n  ".join(k["findings"]) for k in broken)


def test_a_kernel_that_breaks_a_rule_is_reported(tmp_path):
    """The collector sees a Blackwell kernel missing tcgen05.wait::ld, and only an asserted lint exempts it."""
    cells = '''
```{code-cell} ipython3
from tvm.script import tirx as T
import gpubook as gb
from gpubook import lint

@T.prim_func
def no_wait(out: T.Buffer((128,), "float32")):
    T.device_entry()
    _cta = T.cta_id([1])
    warp = T.warp_id([4])
    lane = T.lane_id([32])
    pool = T.SMEMPool()
    tmem_addr = pool.alloc((1,), "uint32")
    pool.commit()
    if warp == 0:
        T.ptx.tcgen05.alloc.cta_group__1.sync.aligned.shared__cta.b32(T.address_of(tmem_addr[0]), T.uint32(32))
        T.ptx.tcgen05.relinquish_alloc_permit.cta_group__1.sync.aligned()
    T.ptx.tcgen05.fence__before_thread_sync()
    T.cuda.cta_sync()
    T.ptx.tcgen05.fence__after_thread_sync()
    v = T.alloc_local((1,), "float32")
    T.ptx["tcgen05.ld.sync.aligned.32x32b.x1.b32"](v[0], tmem_addr[0] + T.uint32((32 * warp) << 16))
    out[warp * 32 + lane] = v[0]
    T.ptx.tcgen05.fence__before_thread_sync()
    T.cuda.cta_sync()
    if warp == 0:
        T.ptx.tcgen05.fence__after_thread_sync()
        T.ptx.tcgen05.dealloc.cta_group__1.sync.aligned.b32(tmem_addr[0], T.uint32(32))

k = gb.build(no_wait, name="no_wait")
```
'''
    chapter = tmp_path / "chapters" / "Z-broken.md"
    chapter.parent.mkdir()
    header = ("---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
              "    format_version: 0.13\nkernelspec:\n  display_name: Python 3\n  language: python\n"
              "  name: python3\n---\n\n# Z\n\n")
    chapter.write_text(header + cells)
    with pytest.raises(AssertionError, match=r"\[wait-ld\]"):
        _run(chapter)                               # an undeclared break fails the build itself
    declared = cells.replace('name="no_wait")', 'name="no_wait", breaks=("wait-ld",))')
    chapter.write_text(header + declared + "\n```{code-cell} ipython3\nprint(lint.report(k.ptx))\n```\n")
    [row] = _run(chapter)
    assert row["name"] == "no_wait" and row["features"] and row["shown_broken"], row
    assert any(f.startswith("[wait-ld]") for f in row["findings"]), row
    chapter.write_text(header + declared + "\n```{code-cell} ipython3\nassert [f.rule for f in lint.lint(k.ptx)] == ['wait-ld']\n```\n")
    [row] = _run(chapter)
    assert row["shown_broken"], row
