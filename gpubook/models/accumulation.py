"""A CPU model of the FP8 tensor core's short accumulator, with and without promotion.

DeepSeek-AI's V3 technical report (arXiv 2412.19437, section 3.3.2, "Increasing Accumulation
Precision") measured that the FP8 GEMMs of Hopper's tensor cores keep "around 14 bits" of the
sums they accumulate, and promotes the partial sums into fp32 registers every N_C = 128
elements of K (four `wgmma` of K = 32). SageAttention2 (Zhang et al., arXiv 2411.10958) names
the format: an FP22 accumulator, 1 sign, 8 exponent and 13 mantissa bits.

The model, for D = A Bᵀ over K in chunks of `chunk` = 32 (one `wgmma` K step):
- each chunk's 32 products are summed exactly (products of E4M3 values are exact, and 32 of
  them fit in fp64 without rounding);
- the tensor core adds that sum to its accumulator and keeps `bits` = 14 significant bits (the
  leading one and 13 mantissa bits), dropping the rest (`rounding="truncate"`, toward zero,
  the way an adder that has no room for the low bits loses them; "nearest" rounds instead);
- without promotion that accumulator runs over all of K; with promotion every `promote` = 128
  elements of K, it starts from zero for each block and the block's sum is added into an fp32
  accumulator with an ordinary fp32 addition (round to nearest), as DeepGEMM does.

The reference is the same products summed in fp64. With positive inputs every partial sum
grows, so the bits the short accumulator drops are lost on every chunk and never cancel: the
relative error grows with the number of chunks, i.e. with K. Promotion caps each short sum at
one block, so the error no longer grows with K.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .plots import PAGE_WIDTH_IN, PALETTE, SIZES, new_figure

TC_BITS = 14        # significant bits the model's tensor core keeps (FP22: 13 mantissa bits)
TC_CHUNK = 32       # K per wgmma of E4M3, the step after which the accumulator is rounded
PROMOTE_EVERY = 128  # K per promotion: one K tile of chapter 12H's step 2, DeepGEMM's N_C
MODEL_SHAPE = (64, 64)  # M, N of the model's product: 4096 outputs, fast on a CPU
KS = (1024, 2048, 4096, 8192, 12288, 16384)


def keep_bits(x: Any, bits: int, rounding: str = "truncate") -> Any:
    """`x` (float64 array) with `bits` significant bits left: truncated toward zero, or rounded
    to nearest even with rounding="nearest". Zero stays zero."""
    m, e = np.frexp(np.asarray(x, dtype=np.float64))   # x = m 2^e, 0.5 <= |m| < 1
    scaled = m * 2.0 ** bits
    if rounding == "truncate":
        q = np.trunc(scaled)
    elif rounding == "nearest":
        q = np.rint(scaled)
    else:
        raise ValueError(f"rounding must be 'truncate' or 'nearest', got {rounding!r}")
    return np.ldexp(q, e - bits)


def accumulate(a: Any, b: Any, ks: Sequence[int], promote: int | None, bits: int = TC_BITS,
               chunk: int = TC_CHUNK, rounding: str = "truncate") -> dict[int, tuple[Any, Any]]:
    """The model's D = A Bᵀ over the first k columns of A (M x K) and B (N x K), for each k in
    `ks`: {k: (D, reference)}, D as the model accumulates it (float64 holding fp32 or shorter
    values) and the reference in fp64. `promote`: K per promotion into fp32, or None."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    wanted = sorted(set(ks))
    step = chunk if promote is None else promote
    if promote is not None and promote % chunk:
        raise ValueError(f"promotion every {promote} of K must be a whole number of {chunk}-chunks")
    if any(k <= 0 or k % step or k > a.shape[1] for k in wanted) or a.shape[1] != b.shape[1]:
        raise ValueError(f"each K must be a positive multiple of {step} within A's and B's "
                         f"{a.shape[1]} and {b.shape[1]} columns, got {wanted}")
    M, N = a.shape[0], b.shape[0]
    ref, short = np.zeros((M, N)), np.zeros((M, N))
    acc32 = np.zeros((M, N), dtype=np.float32)
    out: dict[int, tuple[Any, Any]] = {}
    for c in range(wanted[-1] // chunk):
        k0, k1 = c * chunk, (c + 1) * chunk
        part = a[:, k0:k1] @ b[:, k0:k1].T          # exact: 32 products of E4M3 values
        ref += part
        short = keep_bits(short + part, bits, rounding)
        if promote is not None and k1 % promote == 0:
            acc32 = acc32 + short.astype(np.float32)   # fp32 addition, round to nearest
            short = np.zeros((M, N))
        if k1 in wanted:
            d = short.copy() if promote is None else acc32.astype(np.float64)
            out[k1] = (d, ref.copy())
    return out


def relative_errors(d: Any, ref: Any) -> Any:
    """|D - ref| / |ref| over the outputs whose reference is not zero."""
    d, ref = np.asarray(d, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    nz = ref != 0
    return np.abs(d[nz] - ref[nz]) / np.abs(ref[nz])


def positive_inputs(M: int, N: int, K: int, seed: int = 0) -> tuple[Any, Any]:
    """A (M x K) and B (N x K): uniform in [0, 1) rounded to E4M3, as float64 arrays."""
    import torch

    g = torch.Generator().manual_seed(seed)
    a = torch.rand(M, K, generator=g).to(torch.float8_e4m3fn).double().numpy()
    b = torch.rand(N, K, generator=g).to(torch.float8_e4m3fn).double().numpy()
    return a, b


def model_curves(ks: Sequence[int] = KS, shape: tuple[int, int] = MODEL_SHAPE, seed: int = 0,
                 bits: int = TC_BITS, rounding: str = "truncate") -> dict[str, dict[str, list[float]]]:
    """{"no promotion" | "promoted every 128": {"k", "max", "median"}}: the model's relative
    errors on positive inputs (`positive_inputs`) at each K."""
    a, b = positive_inputs(*shape, max(ks), seed)
    out = {}
    for label, promote in (("no promotion", None), (f"promoted every {PROMOTE_EVERY}", PROMOTE_EVERY)):
        res = accumulate(a, b, ks, promote, bits=bits, rounding=rounding)
        errs = [relative_errors(*res[k]) for k in sorted(res)]
        out[label] = {"k": sorted(res), "max": [float(e.max()) for e in errs],
                      "median": [float(np.median(e)) for e in errs]}
    return out


# DeepSeek-V3 technical report, section 3.3.2: "Taking GEMM operations of two random matrices
# with K = 4096 for example, in our preliminary test, the limited accumulation precision in
# Tensor Cores results in a maximum relative error of nearly 2%."
DEEPSEEK_V3_K = 4096
DEEPSEEK_V3_MAX_REL_ERROR = 0.02


def estimate(k: int, promote: int | None = None, bits: int = TC_BITS, chunk: int = TC_CHUNK) -> float:
    """The back-of-envelope relative error of a sum of positive terms that grows linearly: each of
    its n chunks loses half a unit on average, a unit 2^-(bits - 0.5) of the running sum on
    average, and the running sum is half the final one on average: n / 4 units in all."""
    n = (promote or k) // chunk
    return n / 4 * 2.0 ** -(bits - 0.5)


def say_error(v: float | None) -> str:
    """A relative error for the prose: '0.26%', '0.0086%', '1.3e-07', or 'not measured yet'."""
    if v is None:
        return "not measured yet"
    return f"{100 * v:.2g}%" if v >= 1e-5 else f"{v:.1e}"


def at(series: dict[str, list[float]] | None, k: int, stat: str = "max") -> float | None:
    """A series' statistic at K = k, or None when it has none there."""
    if not series or k not in series.get("k", ()):
        return None
    return series[stat][series["k"].index(k)]


def describe(doc: dict[str, Any] | None, model: dict[str, dict[str, list[float]]],
             ks: tuple[int, int] = (4096, 16384)) -> dict[str, str]:
    """The prose's words for a GPU record (`run.promotion`) next to the model: "source" (the GPU,
    date and versions, or "not measured yet") and "sentence", what the record measured."""
    if doc is None:
        return {"source": "not measured yet: no GPU record of this measurement exists",
                "gpu": "not measured yet",
                "sentence": "No GPU has measured this yet: python -m gpubook promotion, run on a "
                            "Hopper GPU, writes the record that the figure's markers and this "
                            "sentence are drawn from."}
    run, inp, ser = doc["run"], doc["inputs"], doc["series"]
    gpu = run["gpu"]
    source = (f"measured on an {gpu} on {run['date']} (torch {run['torch']}, CUDA {run.get('cuda')}; "
              f"{inp['M']} × {inp['N']} outputs, {doc.get('file', 'its record')})")
    k0, k1 = ks
    parts = []
    for name, what in (("fast", "cuBLASLt's FP8 GEMM with fast accumulation"),
                       ("promoted", "its default accumulation"), ("blockwise", "its blockwise-scaled GEMM")):
        if name in ser:
            parts.append(f"{what} {say_error(at(ser[name], k0))} at K = {k0} and "
                         f"{say_error(at(ser[name], k1))} at K = {k1}")
    fast, mod = at(ser.get("fast"), k1), at(model.get("no promotion"), k1)
    versus = (f"; fast accumulation's error at K = {k1} is {fast / mod:.2g}× the model's"
              if fast and mod else "")
    if fast and mod and fast > 3 * mod:  # the hardware keeps fewer bits than the model gives it
        versus += (". The GPU loses more than a 14-bit accumulator would: the model is a lower bound "
                   "on what fast accumulation costs, and what the two agree on is the shape, an "
                   "error that grows with K without promotion and stays flat with it")
    skipped = "".join(f" ({n} could not run: {why})" for n, why in doc.get("skipped", {}).items())
    sentence = (f"On the {gpu} ({run['date']}) the largest relative errors were: "
                + "; ".join(parts) + versus + "." + skipped)
    return {"source": source, "gpu": gpu, "sentence": sentence}


MEASURED_STYLE = {"fast": ("o", PALETTE["vermillion"], "fast accumulation"),
                  "promoted": ("s", PALETTE["blue"], "default (promoted)"),
                  "blockwise": ("^", PALETTE["green"], "blockwise scales")}


def plot_promotion(model: dict[str, dict[str, list[float]]], measured: dict[str, Any] | None = None,
                   gpu_label: str | None = None) -> Any:
    """The model's max relative error against K (lines, the median dotted), and, from a GPU
    record (`run.promotion`'s "series"), torch._scaled_mm's measured maxima as markers."""
    fig = new_figure(PAGE_WIDTH_IN, 4.0)
    ax = fig.add_subplot()
    ax.set_facecolor("white")
    colors = {"no promotion": PALETTE["vermillion"]}
    for label, s in model.items():
        c = colors.get(label, PALETTE["blue"])
        ax.plot(s["k"], s["max"], color=c, lw=1.8, label=f"model, {label}: max", gid=f"model-{label}")
        ax.plot(s["k"], s["median"], color=c, lw=1.0, ls=":", label=f"model, {label}: median")
    for name, s in (measured or {}).items():
        if name not in MEASURED_STYLE or not s.get("k"):
            continue
        marker, c, what = MEASURED_STYLE[name]
        ax.plot(s["k"], s["max"], ls="none", marker=marker, ms=6, mfc="white", mec=c, mew=1.6,
                label=f"{gpu_label or 'GPU'}, {what}: max", gid=f"measured-{name}")
    ks = [k for s in model.values() for k in s["k"]]
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sorted(set(ks)), [f"{k // 1024}K" if k % 1024 == 0 else str(k) for k in sorted(set(ks))])
    ax.set_xlim(min(ks) / 1.3, max(ks) * 1.3)
    ax.set_xlabel("K (elements summed per output)", fontsize=SIZES["label"])
    ax.set_ylabel("relative error |D − ref| / ref", fontsize=SIZES["label"])
    ax.tick_params(labelsize=SIZES["tick"])
    ax.grid(True, which="major", color="#dddddd", lw=0.6)
    if measured is None:
        ax.text(0.98, 0.04, "not measured on a GPU yet: the model alone", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=SIZES["note"], color=PALETTE["grey"])
    ax.legend(loc="upper left", fontsize=SIZES["legend"], facecolor="white", framealpha=1.0,
              ncol=2 if measured else 1)
    shown = [v for s in model.values() for v in s["median"] + s["max"]]
    shown += [v for n, s in (measured or {}).items() if n in MEASURED_STYLE for v in s.get("max", ())]
    shown = [v for v in shown if v > 0]
    ax.set_ylim(min(shown) / 3, max(shown) * 30)   # room above for the legend
    fig.tight_layout()
    return fig


def growth(errors: Sequence[float], ks: Sequence[int]) -> float:
    """How the error scales between the first and last K: the exponent p of err ~ K^p."""
    return math.log(errors[-1] / errors[0]) / math.log(ks[-1] / ks[0])
