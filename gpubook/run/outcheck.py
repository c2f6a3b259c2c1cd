"""The output check of a timed case: the kernel's output at the timed shape, compared with its
baseline's (or a reference's) on the same inputs, before anything is timed.

A kernel is built for each shape it runs at, so the build that is timed is not the build that
the chapter's checks compared: other constants, other tile counts, rings that wrap more often.
A timing is only reported for a kernel whose timed build computed the right answer.

Tolerances are named so that a GPU host can rebuild them from the case alone:
- "exact": every element equal (copies, transposes, elementwise adds in the same precision);
- (atol, rtol): |out - ref| <= atol + rtol |ref| elementwise;
- {"bound": "gemm"} (with "repeats": r, D = r A Bᵀ summed r times): D = A Bᵀ in fp32 accumulation, both sides rounded to D's dtype. Each fp32
  sum is within e = K 2^-23 (|A| |B|ᵀ)_ij of the exact one (2^-23, not the unit roundoff 2^-24:
  a tensor core's adder may truncate), and each rounding adds u |x| (u: the output's unit
  roundoff). Two such results differ by at most 2(1+u) e + 2u |x|, and |x| <= (|ref| + (1+u) e)
  / (1-u); 2.05 e + 2.02 u |ref| covers both for u <= 2^-8;
- {"bound": "sum"}: the same for a row sum (B = a row of ones);
- {"bound": "attention", "factor": f}: |out - ref| <= f u max|V| against the fp32 reference;
- {"bound": "reference", "factor": f, "low": name} (f = 2 by default): the reference's own error
  sets the allowance. `ref` is an fp32 reference; LOW[name] computes the same output the way a
  plain PyTorch program in the kernel's precision would, on the same inputs and the same device.
  In each row of the output (its last axis: one query's output vector, one row of D), the
  kernel's largest error may be at most f e_ref + eps, where e_ref is that row's largest error
  of the low-precision result and eps = u max|ref| over the row: one rounding of the row's
  largest element to the output's dtype, which the kernel makes wherever the low-precision
  result happened to round better. The rule is FlashAttention's test rule (twice the error of
  a reference in the kernel's precision), applied row by row so that the rows with the largest
  outputs (the first rows under a causal mask) do not set the allowance of all the others;
- {"bound": "lse", "causal": c, "exp_rel_error": e}: a row's log-sum-exp against its float64
  value, within `lse_allowance` of the largest scaled score the inputs make (`e`: the relative
  error of the kernel's exponentials beyond the MUFU's, 0 for a kernel that takes them all there).

A kernel with several outputs (O and the LSE) names them by parameter index: its reference
returns one tensor per output and its tolerance is a list, one per output (see `bench`).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .attnref import (  # noqa: F401 - hidden_keys, heads_view, lse_allowance: used through outcheck
    UNIT_ROUNDOFF, _lse_fp64, _lse_limit, _per_sequence, _sdpa_fp32, _sdpa_low, heads_view, hidden_keys,
    lse_allowance)


def _t():
    import torch

    return torch


def _scaled_matmul(a: Any, b: Any, sa: Any, sb: Any, block: int = 128) -> Any:
    """D = A Bᵀ of an FP8 GEMM with its scales, in fp32: one scale per tensor (sa, sb of shape
    (1,)), or block scales sa (K/block, M) per row and K block, sb (ceil(N/block), K/block) per
    block x block tile of B."""
    a, b = a.float(), b.float()
    if sa.dim() == 1:
        return (a @ b.t()) * (sa.float() * sb.float())
    sa_full = sa.float().t().repeat_interleave(block, dim=1)[:, :a.shape[1]]
    sb_full = sb.float().repeat_interleave(block, dim=0)[:b.shape[0]].repeat_interleave(block, dim=1)[:, :b.shape[1]]
    return (a * sa_full) @ (b * sb_full).t()


def _box_corners(a: Any, b: Any, blk_m: int, blk_n: int, blk_k: int, ctas: int) -> Any:
    """What a probe of TMA loads writes: `ctas` CTAs walk the (blk_m x blk_n) tiles of
    D = A @ B.T in row-major order, CTA c the tiles c, c + ctas, ..., loading every K tile of
    each, and each sums in fp32 the first element of every A and B box it loaded."""
    torch = _t()
    tiles_n, k_tiles = b.shape[0] // blk_n, a.shape[1] // blk_k
    t = torch.arange((a.shape[0] // blk_m) * tiles_n, device=a.device)
    cols = torch.arange(k_tiles, device=a.device) * blk_k
    rows_a, rows_b = t // tiles_n * blk_m, t % tiles_n * blk_n
    per_tile = (a[rows_a][:, cols].double() + b[rows_b][:, cols].double()).sum(dim=1)
    out = torch.zeros(ctas, dtype=torch.float64, device=a.device)
    return out.index_add_(0, t % ctas, per_tile).float()


# What an output is compared with when no timed baseline computes it (or a more exact one):
# each takes the kernel's inputs and keyword parameters from the case and returns the output.
REFERENCES: dict[str, Callable[..., Any]] = {
    "copy": lambda x, **_: x.clone(),
    "scale": lambda x, factor, **_: x * factor,   # a copy that multiplies by a constant
    "transpose": lambda x, **_: x.t().contiguous(),
    "row_sum": lambda x, **_: x.sum(dim=-1),
    "matmul_nt": lambda a, b, scale=1, **_: (scale * (a.float() @ b.float().t())),
    "box_corners": lambda a, b, blk_m, blk_n, blk_k, ctas, **_: _box_corners(a, b, blk_m, blk_n, blk_k, ctas),
    "sdpa_fp32": lambda q, k, v, **_: _sdpa_fp32(q, k, v, causal=False),
    "sdpa_fp32_causal": lambda q, k, v, **_: _sdpa_fp32(q, k, v, causal=True),
    # two outputs: O, and each row's log-sum-exp in float64
    "sdpa_fp32_lse": lambda q, k, v, causal=False, **_: (_sdpa_fp32(q, k, v, causal=causal), _lse_fp64(q, k, causal)),
    # a local window: query i sees keys i - left through i + right
    "sdpa_fp32_window": lambda q, k, v, left, right, **_: _sdpa_fp32(q, k, v, False, (left, right)),
    # a variable-length batch, packed (total, H, d), sequence b in rows cu[b] to cu[b + 1]
    "sdpa_fp32_varlen": lambda q, k, v, cu, causal=False, **_: _per_sequence(
        _sdpa_fp32, q, k, v, cu, _t().float32, causal=causal),
    "scaled_matmul_nt": lambda a, b, sa, sb, **_: _scaled_matmul(a, b, sa, sb),
    # decoding: the queries stored (batch · heads · seqlen_q, d), the rows of a KV head's group
    # adjacent (the kernel's other arguments, a workspace, follow K and V and are not read here)
    "sdpa_fp32_decode": lambda q, k, v, *_, heads, seqlen_q, **__: _sdpa_fp32(
        heads_view(q, k, heads, seqlen_q), k, v, causal=False).reshape(q.shape),
}

# The low-precision results of the "reference" bound: each takes the kernel's inputs, the fp32
# reference and the output's dtype (and the tolerance's own parameters, such as a window's
# "left" and "right"), and returns the output a program in that precision computes.
LOW: dict[str, Callable[..., Any]] = {
    # a GEMM in the kernel's precision: fp32 sums (the reference's), rounded to D's dtype once
    "rounded": lambda inputs, ref, dtype, **_: ref.to(dtype),
    "sdpa_lowp": lambda inputs, ref, dtype, **_: _sdpa_low(*inputs[:3], causal=False),
    "sdpa_lowp_causal": lambda inputs, ref, dtype, **_: _sdpa_low(*inputs[:3], causal=True),
    "sdpa_lowp_window": lambda inputs, ref, dtype, left, right, **_: _sdpa_low(*inputs[:3], False, (left, right)),
    "sdpa_lowp_varlen": lambda inputs, ref, dtype, causal=False, **_: _per_sequence(
        _sdpa_low, *inputs[:4], dtype, causal=causal),
    "sdpa_lowp_decode": lambda inputs, ref, dtype, heads, seqlen_q, **_: _sdpa_low(
        heads_view(inputs[0], inputs[1], heads, seqlen_q), *inputs[1:3], False).reshape(inputs[0].shape),
}
# what a "reference" bound may carry besides its own keys: the parameters of its low result
LOW_PARAMETERS = ("left", "right", "causal", "heads", "seqlen_q")


def tolerance_spec(tolerance: Any) -> dict[str, Any]:
    """A tolerance as the JSON a case stores: {"exact": True}, {"atol", "rtol"} or {"bound", ...}."""
    if tolerance == "exact":
        return {"exact": True}
    if isinstance(tolerance, (tuple, list)) and len(tolerance) == 2:
        atol, rtol = (float(x) for x in tolerance)
        if atol < 0 or rtol < 0:
            raise ValueError(f"tolerance must be non-negative, got {tolerance}")
        return {"atol": atol, "rtol": rtol}
    if isinstance(tolerance, dict) and tolerance.get("bound") in ("gemm", "sum", "attention", "reference", "lse"):
        spec = dict(tolerance)
        if spec["bound"] == "attention" and not float(spec.get("factor", 0)) > 0:
            raise ValueError("an attention bound needs a positive 'factor' (|err| <= factor u max|V|)")
        if spec["bound"] == "reference":
            spec.setdefault("factor", 2)
            if spec.get("low") not in LOW:
                raise ValueError(f"a reference bound names its low-precision result: 'low' one of {', '.join(LOW)}")
            if not float(spec["factor"]) > 0:
                raise ValueError("a reference bound needs a positive 'factor' (|err| <= factor e_ref + eps)")
        return spec
    if isinstance(tolerance, dict) and ("exact" in tolerance or "atol" in tolerance):
        return dict(tolerance)
    raise ValueError(f"tolerance must be 'exact', (atol, rtol) or {{'bound': 'gemm'|'sum'|'attention'|'reference'|'lse'}}, "
                     f"not {tolerance!r}")


def reference_spec(reference: Any) -> dict[str, Any] | None:
    """A reference as stored: {"op": name, **parameters}, or None (the first timed baseline)."""
    if reference is None:
        return None
    spec = {"op": reference} if isinstance(reference, str) else dict(reference)
    if spec.get("op") not in REFERENCES:
        raise ValueError(f"unknown reference {spec.get('op')!r}; known: {', '.join(REFERENCES)}")
    return spec


def reference_allowance(spec: dict[str, Any], inputs: Sequence[Any], ref: Any, out_dtype: str
                        ) -> tuple[Any, Any, Any]:
    """The "reference" bound's (allowance, e_ref, eps), each one value per row of `ref` (its
    last axis kept, of length 1): allowance = factor e_ref + eps."""
    torch = _t()
    with torch.no_grad():
        params = {k: spec[k] for k in LOW_PARAMETERS if k in spec}
        low = LOW[spec["low"]](inputs, ref, getattr(torch, out_dtype), **params)
        e_ref = (low.to(ref.dtype) - ref).abs().amax(dim=-1, keepdim=True)
        del low
        eps = UNIT_ROUNDOFF[out_dtype] * ref.abs().amax(dim=-1, keepdim=True)
    return float(spec.get("factor", 2)) * e_ref + eps, e_ref, eps


def reference_atol(low: str, inputs: Sequence[Any], ref: Any, out_dtype: str, factor: float = 2,
                   cap: float | None = None, **params: Any) -> float:
    """The "reference" bound as one atol for a check's elementwise comparison (rtol 0): factor
    times the low-precision result's largest error plus one rounding of the largest output,
    over the whole output; no larger than `cap` (an allowance argued otherwise) when given."""
    torch = _t()
    ref = ref.to(torch.float32)
    spec = {"bound": "reference", "factor": factor, "low": low, **params}
    _, e_ref, _ = reference_allowance(spec, inputs, ref, out_dtype)
    atol = factor * float(e_ref.max()) + UNIT_ROUNDOFF[out_dtype] * float(ref.abs().max())
    return atol if cap is None else min(atol, float(cap))


def _limits(spec: dict[str, Any], inputs: Sequence[Any], ref: Any, out_dtype: str) -> tuple[Any, float]:
    """(elementwise atol, rtol) of a tolerance spec on these inputs."""
    torch = _t()
    if spec.get("exact"):
        return 0.0, 0.0
    if "atol" in spec:
        return float(spec["atol"]), float(spec["rtol"])
    u = UNIT_ROUNDOFF[out_dtype]
    if spec["bound"] == "lse":
        return _lse_limit(inputs, spec), 0.0
    if spec["bound"] == "attention":
        return float(spec["factor"]) * u * float(inputs[2].float().abs().max()), 0.0
    if spec["bound"] == "gemm":  # "repeats": D accumulates A Bᵀ that many times (r K products)
        a, b, r = inputs[0], inputs[1], int(spec.get("repeats", 1))
        k = r * a.shape[-1]
        summed = r * (a.float().abs() @ b.float().abs().t())
    else:  # sum
        k = inputs[0].shape[-1]
        summed = inputs[0].float().abs().sum(dim=-1)
    return 2.05 * k * 2.0**-23 * summed.reshape(ref.shape), 2.02 * u


def compare_output(out: Any, ref: Any, spec: dict[str, Any], inputs: Sequence[Any], against: str) -> dict[str, Any]:
    """The record of one output check: elements, mismatches, the largest error and the largest
    error as a fraction of its allowance, the first mismatch, and whether it passed."""
    torch = _t()
    out_dtype = str(out.dtype).removeprefix("torch.")
    ref = ref.to(torch.float32) if ref.dtype != torch.float64 else ref
    o = out.to(ref.dtype)
    if spec.get("bound") == "reference":
        atol, e_ref, eps = reference_allowance(spec, inputs, ref, out_dtype)
        rtol = 0.0
    else:
        atol, rtol = _limits(spec, inputs, ref, out_dtype)
    err = (o - ref).abs()
    allowed = atol + rtol * ref.abs()
    bad = ~(err <= allowed)  # NaN and inf outside the allowance count as mismatches
    if spec.get("exact"):
        bad = ~((o == ref) | (torch.isnan(o) & torch.isnan(ref)))
    n_bad = int(bad.sum())
    finite = torch.isfinite(err)
    rec: dict[str, Any] = {
        "against": against, "tolerance": spec, "elements": out.numel(), "mismatches": n_bad,
        "max_abs_error": float(err[finite].max()) if bool(finite.any()) else float("nan"),
        "nonfinite": int((~torch.isfinite(o)).sum()),
        "passed": n_bad == 0,
    }
    if not spec.get("exact"):
        ratio = err / torch.as_tensor(allowed, device=err.device).clamp_min(torch.finfo(torch.float32).tiny)
        rec["max_error_over_allowed"] = float(ratio[finite].max()) if bool(finite.any()) else float("nan")
    if spec.get("bound") == "reference":
        # the row whose error used most of its allowance, and what its allowance was made of
        worst = torch.nan_to_num(ratio, nan=float("inf")).amax(dim=-1, keepdim=True)
        row = int(torch.argmax(worst.reshape(-1)))
        rec["reference_error"] = float(e_ref.max())
        rec["worst_row"] = {"error": float(torch.nan_to_num(err, nan=float("inf")).reshape(-1, err.shape[-1])[row].max()),
                            "reference_error": float(e_ref.reshape(-1)[row]), "eps": float(eps.reshape(-1)[row]),
                            "allowance": float(atol.reshape(-1)[row])}
    if n_bad:
        idx = [int(i) for i in torch.nonzero(bad)[0]]
        rec["first_mismatch"] = {"index": idx, "got": float(o[tuple(idx)]), "expected": float(ref[tuple(idx)])}
    return rec


def compare_outputs(got: Sequence[Any], expected: Sequence[Any], specs: Sequence[dict[str, Any]],
                    inputs: Sequence[Any], against: str, indices: Sequence[int] | None = None) -> dict[str, Any]:
    """`compare_output` for each of a kernel's outputs; `indices` (their parameter positions)
    when it has several: then one record that passes when every output does, with each
    output's record under "outputs"."""
    recs = [compare_output(g, e, spec, inputs, against) for g, e, spec in zip(got, expected, specs, strict=True)]
    if indices is None:
        return recs[0]
    return {"against": against, "outputs": [dict(r, index=i) for i, r in zip(indices, recs)],
            "elements": sum(r["elements"] for r in recs), "mismatches": sum(r["mismatches"] for r in recs),
            "passed": all(r["passed"] for r in recs),
            "max_error_over_allowed": max(r.get("max_error_over_allowed", 0.0) for r in recs)}


def describe(rec: dict[str, Any] | None) -> str:
    """One line: 'output checked against matmul_nt at this shape: 0 of 16777216 elements outside
    the allowance (max error 0.5, 31% of it)'."""
    if not rec:
        return "output not checked"
    if rec.get("unchecked"):
        return f"output not checked: {rec['unchecked']}"
    if "outputs" in rec:
        return "; ".join(f"parameter {r['index']}: {describe(r)}" for r in rec["outputs"])
    line = (f"output checked against {rec['against']} at the timed shape: {rec['mismatches']} of "
            f"{rec['elements']} elements outside the {'exact match' if rec['tolerance'].get('exact') else 'allowance'}")
    if "worst_row" in rec:
        w, f = rec["worst_row"], rec["tolerance"].get("factor", 2)
        line += (f" (max error {rec['max_abs_error']:.3g}; in the row that used most of its allowance "
                 f"{f:g}·e_ref + eps, error {w['error']:.3g} = {100 * rec['max_error_over_allowed']:.0f}% of "
                 f"{w['allowance']:.3g}, with e_ref {w['reference_error']:.3g} the error of "
                 f"{rec['tolerance']['low']} there and eps {w['eps']:.3g})")
    elif "max_error_over_allowed" in rec and rec["passed"]:
        line += f" (max error {rec['max_abs_error']:.3g}, {100 * rec['max_error_over_allowed']:.0f}% of its allowance)"
    if rec.get("first_mismatch"):
        m = rec["first_mismatch"]
        line += f"; first at {tuple(m['index'])}: {m['got']:.6g} instead of {m['expected']:.6g}"
    return line


class OutputMismatch(AssertionError):
    """A timed kernel whose output at the timed shape disagrees with its baseline's."""
