"""Execute the chapters with exporting on, and write the harness's self-test cases."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from ..facts.paths import CHAPTERS, REPO
from ..run.record import (  # noqa: F401 - the names a reader of an export looks up here too
    EXPORT_ENV, EXPORT_ONLY_ENV, FORMAT_VERSION, case_slug, current_chapter, export_dir, exporting,
    record_check, record_perf, set_chapter,
)


def export_chapters(out: Path, chapters: Sequence[Path] = ()) -> int:
    """Execute chapters (default: all of chapters/) with exporting on; return an exit code."""
    import jupytext
    from nbclient import NotebookClient

    from ..run.jupyter import quiet_kernels

    quiet_kernels()

    files = list(chapters) or sorted(CHAPTERS.glob("[0-9A-Z]*.md"))
    out = out.resolve()
    (out / "cases").mkdir(parents=True, exist_ok=True)
    os.environ[EXPORT_ENV] = str(out)
    for f in files:
        nb = jupytext.read(f, fmt="md:myst")
        print(f"export: executing {f.name}", flush=True)
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(f.parent)}}).execute()
    n = len([p for p in (out / "cases").iterdir() if p.is_dir()])
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"export: {n} cases, {size / 1e6:.1f} MB in {out}")
    return 0


SELFTEST_CHAPTER = "selftest"


def export_selftest(out: Path) -> int:
    """Write the harness's self-test cases (kernels from tests/kernels.py) to `out`.

    A replay of them on a GPU shows that the harness catches what it claims to catch: an
    off-by-one tail guard that writes one element past `out` must fail (a comparison alone
    and compute-sanitizer's memcheck both pass it), a correct kernel must pass a stress run,
    and each L2 flush of the timing loop must run.
    """
    import sys

    import torch

    from ..run.bench import bench
    from ..compile.build import build
    from .check import prepare
    from .compare import seeded

    root = REPO
    sys.path.insert(0, str(root / "tests"))
    import kernels  # the test kernels, never a chapter's

    out = out.resolve()
    (out / "cases").mkdir(parents=True, exist_ok=True)
    env_before = os.environ.get(EXPORT_ENV)
    os.environ[EXPORT_ENV] = str(out)
    before = current_chapter()
    set_chapter(SELFTEST_CHAPTER)
    try:
        n = kernels.NT
        args = [seeded((n,), seed=1), seeded((n,), seed=2), torch.empty(n)]
        wrong = build(kernels.vadd_off_by_one, name="vadd_off_by_one")
        prepare(wrong, args, lambda x, y, o: x + y).record(
            expect="fail", expect_message="wrote 1 element after out")
        right = build(kernels.vadd_tail, name="vadd_tail")
        prepare(right, args, lambda x, y, o: x + y, stress=200).record()
        for flush in ("read", "write", "none"):
            bench(right, bytes=3 * n * 4, flops=n, name=f"vadd_tail_flush_{flush}", flush=flush,
                  baseline="add", tolerance="exact")
    finally:
        set_chapter(before)
        if env_before is None:
            os.environ.pop(EXPORT_ENV, None)
        else:
            os.environ[EXPORT_ENV] = env_before
    cases = sorted(p.name for p in (out / "cases").iterdir() if p.is_dir())
    print(f"export-selftest: {len(cases)} cases in {out}: {', '.join(cases)}")
    return 0
