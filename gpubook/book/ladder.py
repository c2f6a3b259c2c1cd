"""The GEMM ladder as the chapters show it: a step as a callable, what changed from one step to
the next, the Hopper twin of a step, and the ladder's table and figure (with measurements)."""

from __future__ import annotations

import inspect
import math
import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..facts.hardware import B200, GPU
from ..facts.paths import CHAPTERS
from ..models.gemm_model import *  # noqa: F403
from ..models.gemm_model import problem
from ..verify.static import fingerprint
from .diffs import CONTEXT, Diff, unified

CHAPTERS_DIR = CHAPTERS


class Gemm:
    """One step of the ladder as a function of torch tensors: `D = gemm(A, B)`.

    A call checks the arguments (`problem`), builds the kernel for their shapes once (`make(M,
    N, K, dtype, **options)` returns the TIRx PrimFunc), and launches it on the GPU. A call the
    kernels cannot serve raises GemmCallError before anything is built; on a machine without a
    GPU that can run the kernel, a valid call raises RuntimeError after the build.
    """

    def __init__(self, make: Callable[..., Any], name: str, blk_k: int, m: int | None = None,
                 n: int | None = None, k: int | None = None, **options: Any):
        self.make, self.name, self.blk_k = make, name, blk_k
        self.pinned = {"m": m, "n": n, "k": k}
        self.options = options
        self._kernels: dict[tuple[int, int, int, str], Any] = {}

    def kernel(self, M: int, N: int, K: int, dtype: str) -> Any:
        """The built kernel for these sizes (gb.build, cached)."""
        from ..compile.build import build

        key = (M, N, K, dtype)
        if key not in self._kernels:
            self._kernels[key] = build(self.make(M, N, K, dtype, **self.options),
                                       name=f"{self.name}_{M}x{N}x{K}_{dtype}")
        return self._kernels[key]

    def __call__(self, A: Any, B: Any) -> Any:
        import torch

        from ..run import runtime

        M, N, K, dtype = problem(A, B, self.blk_k, **self.pinned)
        kern = self.kernel(M, N, K, dtype)
        why = runtime.why_not_here(kern.runs_on)
        if why is not None:
            raise RuntimeError(f"{kern.name} compiled for {', '.join(kern.runs_on)} — not launched: {why}")
        D = torch.empty(M, N, dtype=A.dtype, device=A.device)
        arch = runtime.local_arch()
        runtime.load(kern.export(arch), kern.name, kern.params, arch)(A, B, D)
        return D


# -- what changed ------------------------------------------------------------------------------
def _named_source(f: Callable[..., Any] | str) -> tuple[str, list[str]]:
    """(name, lines) of a function, or of a function's source text (its `def` names it)."""
    if isinstance(f, str):
        m = re.match(r"\s*def (\w+)", f)
        return (m.group(1) if m else "old"), textwrap.dedent(f).splitlines()
    return f.__name__, textwrap.dedent(inspect.getsource(f)).splitlines()


def source_diff(old: Callable[..., Any] | str, new: Callable[..., Any] | str, context: int = CONTEXT) -> str:
    """The unified diff of two functions' source code (what changed from one step to the next);
    either may be given as source text, e.g. a function read from another chapter."""
    (na, a), (nb, b) = _named_source(old), _named_source(new)
    return "\n".join(unified(a, b, na, nb, context))


def source_diff_view(old: Callable[..., Any] | str, new: Callable[..., Any] | str,
                     context: int = CONTEXT) -> Diff:
    """The diff as a reader takes it in (`diffs.Diff`): a caption naming both functions and the
    lines changed, at most `diffs.VISIBLE` lines of it with the changed tokens of each replaced
    line marked, and the rest folded; the whole new listing is the folded cell above it."""
    (na, a), (nb, b) = _named_source(old), _named_source(new)
    return Diff.of(a, b, na, nb, context)


def diff_html(old: Callable[..., Any] | str, new: Callable[..., Any] | str, context: int = CONTEXT) -> str:
    """`source_diff_view` as HTML."""
    return source_diff_view(old, new, context)._repr_html_()


def show_diff(old: Callable[..., Any] | str, new: Callable[..., Any] | str, context: int = CONTEXT,
              whole: str | None = None) -> Diff:
    """`source_diff_view` for a notebook cell to display (HTML, and the unified diff as text);
    `whole` says where the whole new listing is, when not in the folded cell above."""
    d = source_diff_view(old, new, context)
    if whole is not None:
        d.whole = whole
    return d


def chapter_source(chapter: str, name: str, chapters_dir: Path | str | None = None) -> str:
    """The source of the top-level function `name` defined in a code cell of a chapter
    (chapters/<chapter>.md): a step's kernel factory, for diffing against the next chapter's."""
    text = (Path(chapters_dir or CHAPTERS_DIR) / f"{chapter}.md").read_text()
    for cell in re.findall(r"```\{code-cell\}[^\n]*\n(.*?)\n```", text, flags=re.S):
        lines = cell.splitlines()
        for i, ln in enumerate(lines):
            if ln.startswith(f"def {name}("):
                body = [ln]
                for nxt in lines[i + 1:]:
                    if nxt and not nxt[0].isspace():
                        break
                    body.append(nxt)
                while body and not body[-1].strip():
                    body.pop()
                return "\n".join(body)
    raise KeyError(f"no top-level def {name}(...) in a code cell of {chapter}.md")


def chapter_cells(chapter: str, containing: str, chapters_dir: Path | str | None = None) -> list[str]:
    """The code cells of chapters/<chapter>.md whose source contains `containing`, in order."""
    text = (Path(chapters_dir or CHAPTERS_DIR) / f"{chapter}.md").read_text()
    cells = re.findall(r"```\{code-cell\}[^\n]*\n(.*?)\n```", text, flags=re.S)
    return [c for c in cells if containing in c]


def load_factory(chapter: str, name: str, namespace: dict[str, Any],
                 edits: Sequence[tuple[str, str] | tuple[str, str, int]] = ()) -> Callable[..., Any]:
    """Define chapter `chapter`'s function `name` in `namespace` (which must hold the names it
    uses) and return it: a kernel of an earlier chapter, rebuilt to find its replays.

    `edits` are (old, new) replacements applied to the source first, each old text occurring
    exactly once, or (old, new, times), each occurring exactly `times` times and all replaced:
    a planted defect, to show that the chapter's check fails on it, or a kernel's next version."""
    import linecache

    src = chapter_source(chapter, name) + "\n"
    for old, new, *times in edits:
        want = times[0] if times else 1
        if src.count(old) != want:
            raise ValueError(f"{chapter}:{name}: {old!r} occurs {src.count(old)} times, not {want}")
        src = src.replace(old, new)
    tag = f"~{abs(hash(tuple(edits))):x}" if edits else ""
    filename = str(CHAPTERS_DIR / f"{chapter}.md:{name}{tag}")  # TIRx's parser reads the source back
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    exec(compile(src, filename, "exec"), namespace)
    return namespace[re.match(r"def (\w+)\(", src).group(1)]   # an edit may rename it


def diff_counts(old: Callable[..., Any] | str, new: Callable[..., Any] | str) -> tuple[int, int]:
    """(lines removed, lines added) from `old` to `new`."""
    d = source_diff_view(old, new, 0)
    return d.removed, d.added


# Blackwell step -> the step of chapter 10H (the same pipeline on Hopper's wgmma) it mirrors.
HOPPER_TWIN_STEP = {4: 1, 5: 2, 6: 4, 7: 3}


def hopper_twin(step: int, chapters_dir: Path | str | None = None) -> str | None:
    """'chapter 10H, step n: <its title>' as a Markdown link once chapter 10H exists, or a
    plain note naming the chapter; None for a step without a Hopper twin."""
    n = HOPPER_TWIN_STEP.get(step)
    if n is None:
        return None
    found = sorted(Path(chapters_dir or CHAPTERS_DIR).glob("10H-*.md"))
    if not found:
        return f"chapter 10H, step {n} (in preparation)"
    title = next((ln[3:].strip() for ln in found[0].read_text().splitlines()
                  if ln.startswith(f"## Step {n}:")), f"Step {n}")
    return f"[chapter 10H]({found[0].name}), {title[0].lower() + title[1:]}"


def measured(name: str, func: Any, chapter: str | None = None) -> dict[str, Any] | None:
    """The newest replayed timing of exactly this kernel (name and script), or None."""
    from ..facts import results

    return results.latest(name, "perf", chapter=chapter, fingerprint=fingerprint(func))


# -- the ladder's table and figure ---------------------------------------------------------------
@dataclass
class Row:
    """One step in the ladder's table: the model's bound, the published figure, the measurement."""

    step: int
    name: str
    adds: str
    shape: tuple[int, int, int]
    bound: Bound
    published: float | None  # TFLOP/s, at PUBLISHED_SHAPE
    measured: dict[str, Any] | None  # a results case

    @property
    def measured_tflops(self) -> float | None:
        c = self.measured
        if not c or not c.get("ms"):
            return None
        return gemm_flops(*self.shape) / (c["ms"] * 1e-3) / 1e12


PERF_ENV = "GPUBOOK_PERF"


def perf_enabled() -> bool:
    """True when GPUBOOK_PERF asks chapters to build and time the large shapes."""
    return os.environ.get(PERF_ENV, "") not in ("", "0", "false", "no")


def step_row(step: int, name: str, adds: str, make: Callable[..., Any], shape: tuple[int, int, int],
             plan: Plan, dtype: str = "float16", **options: Any) -> Row:
    """One row of the ladder at `shape`: the model's bound, the published figure (at its shape
    only), and the newest replayed timing of exactly this kernel.

    With GPUBOOK_PERF=1 the kernel is also built and timed here (gb.bench, which exports the
    performance case for a GPU host); without it nothing is compiled: the fingerprint of the
    PrimFunc is enough to find a replay.
    """
    from ..run.record import current_chapter

    func = make(*shape, dtype, **options)
    rec = None
    if perf_enabled():
        from ..run.bench import bench
        from ..compile.build import build

        timing = bench(build(func, name=name), flops=gemm_flops(*shape), baseline="matmul_nt",
                       dtype=dtype, tolerance={"bound": "gemm"})   # checked against cuBLAS first
        if timing.status == "measured":
            import datetime

            rec = {"ms": timing.ms, "run": {"gpu": timing.gpu, "date": datetime.date.today().isoformat()}}
    if rec is None:
        rec = measured(name, func, chapter=current_chapter())
    pub = published_tflops(step) if tuple(shape) == PUBLISHED_SHAPE else None
    return Row(step, name, adds, tuple(shape), bound(*shape, plan, dtype=dtype), pub, rec)


def _rate(tflops: float) -> str:
    """A TFLOP/s figure: whole numbers from 100 up, three significant digits below."""
    return f"{tflops:,.0f}" if tflops >= 100 else f"{tflops:.3g}"


def ladder_markdown(rows: Sequence[Row]) -> str:
    """The table: shape, the model's bound (and what binds it), published and measured TFLOP/s."""
    head = ("| step | kernel | adds | M × N × K | model bound, TFLOP/s (binds) | published B200, TFLOP/s "
            "(not measured here) | measured here on a B200, TFLOP/s |\n|---:|---|---|---|---:|---:|---:|")
    lines = [head]
    for r in rows:
        shape = " × ".join(map(str, r.shape))
        pub = "—" if r.published is None else _rate(r.published)
        if r.measured_tflops is None:
            meas = "not measured"
        else:
            run = r.measured["run"]
            meas = f"{_rate(r.measured_tflops)} ({run['gpu'].replace('NVIDIA ', '')}, {run['date']})"
        lines.append(f"| {r.step} | `{r.name}` | {r.adds} | {shape} | "
                     f"{_rate(r.bound.tflops)} ({r.bound.limit}) | {pub} | {meas} |")
    return "\n".join(lines)


def plot_ladder(rows: Sequence[Row], gpu: GPU = B200) -> Any:
    """TFLOP/s per step on a log axis: the model's bound (bars), the published figure and the
    measurement (markers), and the tensor-core peak."""
    from ..models.plots import PALETTE, SIZES, _new_axes, PAGE_WIDTH_IN

    fig, ax = _new_axes(None, size=(PAGE_WIDTH_IN, 4.2))
    xs = list(range(len(rows)))
    shown = [r.bound.tflops for r in rows] + [r.published for r in rows if r.published] + \
        [r.measured_tflops for r in rows if r.measured_tflops]
    base = log_base(shown)
    ax.bar(xs, [r.bound.tflops - base for r in rows], bottom=base, width=0.6, color=PALETTE["sky"],
           label="model bound (roofline + Little's law)", gid="bound")
    pub = [(x, r.published) for x, r in zip(xs, rows) if r.published]
    ax.plot([p[0] for p in pub], [p[1] for p in pub], "D", color=PALETTE["vermillion"], ms=7,
            label="published B200 figure (not measured here)", gid="published")
    meas = [(x, r.measured_tflops) for x, r in zip(xs, rows) if r.measured_tflops]
    if meas:
        ax.plot([m[0] for m in meas], [m[1] for m in meas], "o", color=PALETTE["black"], ms=7,
                label="measured here", gid="measured")
    else:
        ax.plot([], [], "o", color=PALETTE["black"], label="measured here: none yet")
    ax.axhline(gpu.bf16_flops / 1e12, color=PALETTE["grey"], ls="--", lw=1,
               label=f"{gpu.name} dense fp16 peak, {gpu.bf16_flops / 1e12:,.0f} TFLOP/s")
    ax.set_yscale("log")
    ax.set_ylim(base, gpu.bf16_flops / 1e12 * 3)
    ax.set_xticks(xs)
    shapes = {r.shape for r in rows}
    if len(shapes) == 1:   # one shape for every step: said once, in the axis label, not under each bar
        ax.set_xticklabels([f"step {r.step}" for r in rows], fontsize=SIZES["tick"])
        ax.set_xlabel(f"all at {' × '.join(map(str, rows[0].shape))}", fontsize=SIZES["tick"])
    else:
        ax.set_xticklabels([f"step {r.step}\n{'×'.join(map(str, r.shape))}" for r in rows],
                           fontsize=SIZES["tick"])
    ax.set_ylabel("TFLOP/s (log scale)")
    ax.grid(True, axis="y", color="#dddddd", lw=0.6)
    # over the axes, in two columns: inside them it would cover a bar
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=SIZES["legend"],
              facecolor="white", framealpha=1.0)
    fig.tight_layout()
    return fig


def log_base(values: Sequence[float]) -> float:
    """The base of bars on a log axis: the largest power of ten at most half the smallest
    value, so that the shortest bar still shows and no decade of the axis is empty."""
    return 10.0 ** math.floor(math.log10(min(values) / 2))
