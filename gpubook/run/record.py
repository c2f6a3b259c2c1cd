"""Record each kernel check and measurement as a self-contained case that a GPU host can replay:
the one place where the notebook path (gb.check, gb.bench, gb.trace) and the export meet."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Sequence

EXPORT_ENV = "GPUBOOK_EXPORT_DIR"
# A regex on case slugs ("<chapter>--<name>--<kind>"): when set, only matching cases are written
# (a build that exports a few cases to re-simulate them, not the whole book).
EXPORT_ONLY_ENV = "GPUBOOK_EXPORT_ONLY"
# 2: stress runs (case 'stress'/'variants', tensors 'variants'), Hopper-only kernels ('not_built').
FORMAT_VERSION = 2
_current = {"chapter": "unknown"}


def set_chapter(chapter: str) -> None:
    """Name the chapter whose kernels the following checks belong to."""
    _current["chapter"] = chapter


def current_chapter() -> str:
    return _current["chapter"]


def export_dir() -> Path | None:
    d = os.environ.get(EXPORT_ENV)
    return Path(d) if d else None


def case_slug(chapter: str, name: str, kind: str) -> str:
    """The folder name of a case in an export (and its `case` key in a results file)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{chapter}--{name}--{kind}")


def exporting(kind: str, name: str) -> bool:
    """Whether a case of this kind and name is written now (an export is on, and it is selected)."""
    if export_dir() is None:
        return False
    only = os.environ.get(EXPORT_ONLY_ENV)
    return not only or re.search(only, case_slug(_current["chapter"], name, kind)) is not None


def _case_dir(kind: str, name: str) -> Path:
    root = export_dir()
    assert root is not None
    slug = case_slug(_current["chapter"], name, kind)
    d = root / "cases" / slug
    d.mkdir(parents=True, exist_ok=True)
    return d


def tensors_digest(tensors: Sequence[Any]) -> str:
    """sha256 of tensors' dtypes, shapes and bytes (None entries count as absent)."""
    import hashlib

    import torch

    h = hashlib.sha256()
    for t in tensors:
        if t is None:
            h.update(b"none;")
            continue
        t = t.detach().to("cpu").contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def case_digest(kernel: Any, kind: str, what: dict[str, Any]) -> str:
    """A short hash of what a case is beyond the kernel's script: its kind, parameters, inputs
    and expected outputs (seeds included, through their values), tolerances, stress runs, and
    for a timed case its baselines, reference and tolerance. A record credits a check only when
    its case_digest (and, for a GPU run, its toolchain) is this one's."""
    import hashlib

    body = {"fingerprint": kernel.fingerprint, "kind": kind,
            "params": [p.to_json() for p in kernel.params], **what}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def check_digest(kernel: Any, args: Sequence[Any], expected: Sequence[Any], outputs: Sequence[int],
                 tols: Sequence[tuple[float, float]], stress: int = 0,
                 variants: Sequence[tuple[Sequence[Any], Sequence[Any]]] = ()) -> str:
    """The case_digest of a correctness check."""
    # The inputs' bits, not the expected outputs': a reference computed on another CPU (another
    # BLAS) may round differently, and tolerances derived from the inputs are kept to 6 digits.
    inputs = [None if i in outputs else a for i, a in enumerate(args)]
    varied = [None if i in outputs else x for a, _ in variants for i, x in enumerate(a)]
    return case_digest(kernel, "check", {
        "outputs": list(outputs), "tolerances": [[float(f"{x:.6g}") for x in t] for t in tols],
        "stress": int(stress), "inputs": tensors_digest(inputs), "variants": tensors_digest(varied)})


PERF_KEYS = ("bytes", "flops", "baseline", "baselines", "dtype", "flush", "warmup", "repeat",
             "tolerance", "reference", "unchecked")


def perf_digest(kernel: Any, meta: dict[str, Any]) -> str:
    """The case_digest of a timed case (its inputs are random_args of seed 0 on the GPU)."""
    return case_digest(kernel, "perf", {k: meta.get(k) for k in PERF_KEYS})


def toolchain_identity() -> dict[str, str]:
    from ..compile import toolchain

    return toolchain.identity()


def _write_common(d: Path, kernel: Any, meta: dict[str, Any]) -> None:
    for arch in kernel.runs_on:
        kernel.export(arch, str(d / f"module-{arch}.so"))
    (d / "kernel.py").write_text(kernel.script())
    # The PrimFunc itself, for the CPU simulator (`python -m gpubook simulate`), which loads it in
    # an interpreter of its own with the same apache-tvm: the script is for reading, this for loading.
    import tvm

    (d / "kernel.json").write_text(tvm.ir.save_json(kernel.func))
    meta.update(
        format=FORMAT_VERSION, chapter=_current["chapter"], runs_on=list(kernel.runs_on),
        params=[p.to_json() for p in kernel.params], facts=kernel.facts(),
        fingerprint=kernel.fingerprint, toolchain=toolchain_identity(),
    )
    (d / "case.json").write_text(json.dumps(meta, indent=1))


def record_check(
    kernel: Any, name: str, args: Sequence[Any], expected: Sequence[Any],
    outputs: Sequence[int], tols: Sequence[tuple[float, float]], stress: int = 0,
    variants: Sequence[tuple[Sequence[Any], Sequence[Any]]] = (), expect: str = "pass",
    expect_message: str | None = None, resident: int | None = None,
) -> Path | None:
    """When exporting, save a correctness case: modules, inputs, expected outputs, tolerances.

    With `stress`, also the stress run's input variants (args with None for outputs, and
    their expected outputs). `expect="fail"` marks a self-test case that must fail, with
    `expect_message` in its failure message; `expect="trap"` marks a broken kernel that must
    end in a device trap whose output matches the regex `expect_message`; `expect="race"`
    marks a kernel with a shared-memory race that compute-sanitizer's racecheck must report
    (a hazard report matching the regex `expect_message`, when given); `expect="unsafe"` marks
    a kernel that breaks a PTX ordering rule on purpose, which no run judges (the replay records
    it as "not judged"; the simulator records whether its tools caught it). `resident` is the
    number of clusters the CPU simulation keeps resident (see `gpubook.check`).
    """
    if not exporting("check", name):
        return None
    import torch

    d = _case_dir("check", name)
    inputs = [None if i in outputs else a.contiguous() for i, a in enumerate(args)]
    torch.save({
        "args": inputs, "expected": [e.contiguous() for e in expected],
        "variants": [{"args": list(a), "expected": [e.contiguous() for e in ex]} for a, ex in variants],
    }, d / "tensors.pt")
    meta: dict[str, Any] = {
        "kind": "check", "name": name, "outputs": list(outputs),
        "tolerances": [list(t) for t in tols], "stress": int(stress), "variants": len(variants),
        "case_digest": check_digest(kernel, args, expected, outputs, tols, stress, variants),
    }
    if expect not in ("pass", "fail", "trap", "race", "unsafe"):
        raise ValueError(f"expect must be 'pass', 'fail', 'trap', 'race' or 'unsafe', not {expect!r}")
    if expect in ("fail", "trap", "race", "unsafe"):
        meta.update(expect=expect, expect_message=expect_message)
    if resident is not None:
        meta["resident"] = int(resident)
    _write_common(d, kernel, meta)
    return d


def record_perf(kernel: Any, name: str, meta: dict[str, Any]) -> Path | None:
    """When exporting, save a performance case: modules plus shapes, dtypes and the baseline."""
    if not exporting("perf", name):
        return None
    d = _case_dir("perf", name)
    _write_common(d, kernel, {"kind": "perf", "name": name, **meta, "case_digest": perf_digest(kernel, meta)})
    return d


