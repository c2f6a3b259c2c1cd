"""Group expect_tx and the copies on each barrier by loop body, count the copies' bytes, judge.

The rules are those of `gpubook.compile.txbytes` (its docstring says what they prove and what
they cannot see); this module takes the events that module read from the lowered IR.
"""

from __future__ import annotations

import inspect
from typing import Any


def judge(expects: list[Any], loads: list[Any], stores: list[tuple]) -> dict[str, Any]:
    """{"barriers": [{barrier, expected, copies, delivered, verdict}], "not_judged": [...],
    "mismatches": [...]} for the expect_tx events and the copy events of one kernel."""
    record: dict[str, Any] = {"barriers": [], "not_judged": [], "mismatches": []}
    used: set[int] = set()
    groups: dict[tuple, list[Any]] = {}
    for e in expects:
        if e.key is None:
            record["not_judged"].append(f"expect_tx on {e.label}: a barrier address the check cannot resolve")
            continue
        region = _region(e.frames)
        loop = id(region[-1][1]) if region else None
        window = _window(e.seq, e.key, stores)
        slot = next((k for k in groups if k[0] == loop and k[2] == window and _same_key(k[1], e.key)),
                    (loop, e.key, window))
        groups.setdefault(slot, []).append(e)
    for (_, key, window), group in groups.items():
        inside = [ld if window[0] < ld.seq < window[1] else None for ld in loads]
        entry = _judge_group(key, group, inside, used)
        if entry.get("why"):
            record["not_judged"].append(f"{group[0].label}: {entry['why']}")
        record["barriers"].append(entry)
        if entry["verdict"] == "mismatch":
            copies = "; ".join(entry["copies"]) or "no copy"
            record["mismatches"].append(
                f"barrier {entry['barrier']}: expect_tx announces {entry['expected']} B, the copies on it "
                f"deliver {entry['delivered']} B ({copies})")
    keys = [k for _, k, _ in groups]
    for i, ld in enumerate(loads):
        if i in used or ld.key is None:
            continue
        if any(_same_key(k, _local(ld.key)) for k in keys):
            record["not_judged"].append(
                f"a copy ({ld.what}) signals {ld.label} outside the loop body or branch of its expect_tx")
    record["not_judged"] = list(dict.fromkeys(record["not_judged"]))
    return record


def _judge_group(key: tuple, group: list[Any], loads: list[Any], used: set[int]) -> dict[str, Any]:
    """One barrier's expect_tx in one loop body and index window, against the copies in `loads`
    (None for a copy outside the window)."""
    first = group[0]
    region = _region(first.frames)
    entry: dict[str, Any] = {"barrier": first.label, "expected": None, "copies": [], "delivered": 0,
                             "verdict": "not judged"}
    why = next((e.why for e in group if e.why), "")
    conds = _conds(first.frames, region)
    if any(not _same_conds(_conds(e.frames, region), conds) for e in group[1:]):
        why = why or "its expect_tx are posted under different conditions"
    leader_only = any(_is_rank_cond(c) for c, _ in conds)
    if not why:
        entry["expected"] = sum(e.nbytes for e in group)
    for i, ld in enumerate(loads):
        if ld is None or ld.key is None or not _same_key(_local(ld.key), key):
            continue
        if ld.key[2] is not None and ld.key[2] != 0:
            why = why or f"a copy signals the barrier in CTA {ld.key[2]}"
            continue
        if not _starts_with(ld.frames, region):
            continue
        inner = ld.frames[len(region):]
        lconds = [(f[1], f[2]) for f in inner if f[0] == "if"]
        loops = [f[1] for f in inner if f[0] == "for"]
        used.add(i)
        if ld.key[2] == 0 and not leader_only:  # every CTA announces, only rank 0's barrier is signalled
            entry["copies"].append(f"{ld.what} signals rank 0's barrier, none lands on this one in the peer")
            continue
        only = [c for c in lconds if not any(_same_cond(c, d) for d in conds)]
        one_issuer = ld.mask == -1 if isinstance(ld.mask, int) else False  # a multicast try_cancel
        one_issuer = one_issuer and bool(only) and all(_is_one_rank(c) for c in only)
        if only and not one_issuer:
            why = why or f"a copy ({ld.what}) is issued under a condition its expect_tx is not"
            continue
        lconds = [c for c in lconds if all(c is not o for o in only)]
        extra = [c for c in conds if not any(_same_cond(c, d) for d in lconds)]
        if any(not _is_rank_cond(c[0]) for c in extra):
            why = why or f"expect_tx is posted under a condition a copy ({ld.what}) is not"
            continue
        count, why_loop = _trip_count(loops)
        why = why or why_loop
        if ld.why or ld.nbytes is None:
            why = why or ld.why
            continue
        factor, why_factor = (1, "") if one_issuer else _ctas(ld, any(_is_rank_cond(c) for c, _ in lconds))
        why = why or why_factor
        times = count * (factor or 0)
        entry["copies"].append(ld.what + (f" x {times}" if times != 1 else ""))
        entry["delivered"] += ld.nbytes * times
    if why:
        entry["why"] = why
    elif entry["expected"] is not None:
        entry["verdict"] = "match" if entry["expected"] == entry["delivered"] else "mismatch"
    return entry


def _ctas(ld: Any, rank_cond: bool) -> tuple[int | None, str]:
    """How many CTAs' copies of this statement land on the judged barrier."""
    import tvm

    factor = 1
    if ld.mask is not None:
        if rank_cond:
            return None, f"a multicast copy ({ld.what}) is issued under a rank condition"
        if ld.cta_group == 2:
            return None, f"a multicast copy ({ld.what}) with cta_group::2"
        if isinstance(ld.mask, int) and ld.mask == -1:
            return None, "a multicast try_cancel (its issuer is another CTA's choice)"
        if not isinstance(ld.mask, tvm.tirx.IntImm):
            return None, f"a multicast mask known only at run time ({ld.mask})"
        factor = bin(int(ld.mask) & 0xFFFF).count("1")
    if ld.key[2] == 0:
        if ld.cta_group != 2:
            return None, f"a copy ({ld.what}) signals rank 0's barrier without cta_group::2"
        if rank_cond:
            return None, f"a copy ({ld.what}) on the leader's barrier is issued under a rank condition"
        factor *= 2
    return factor, ""


def _trip_count(loops: list[Any]) -> tuple[int, str]:
    import tvm

    count = 1
    for loop in loops:
        if not isinstance(loop, tvm.tirx.For) or not isinstance(loop.extent, tvm.tirx.IntImm):
            return 1, "a copy sits in a loop of run-time extent below its expect_tx's loop"
        count *= int(loop.extent)
    return count, ""


def _window(seq: int, key: tuple, stores: list[tuple]) -> tuple[float, float]:
    """The statements around `seq` in which no buffer that the barrier's index reads is stored to
    (a pipeline state's advance ends one): an expect_tx counts only the copies in its window."""
    import tvm

    read: list[Any] = []
    visit_exprs(key[1], lambda n: read.append(n.source) if isinstance(n, tvm.ir.TensorLoad) else None)
    hits = [at for at, buf, _ in stores if any(buf.same_as(r) for r in read)]
    return max((at for at in hits if at < seq), default=float("-inf")), min((at for at in hits if at > seq),
                                                                            default=float("inf"))


def _region(frames: list) -> list:
    """The frames up to and including the innermost loop (the group's loop body)."""
    last = max((i for i, f in enumerate(frames) if f[0] == "for"), default=-1)
    return frames[: last + 1]


def _conds(frames: list, region: list) -> list[tuple]:
    return [(f[1], f[2]) for f in frames[len(region):] if f[0] == "if"]


def _starts_with(frames: list, prefix: list) -> bool:
    if len(frames) < len(prefix):
        return False
    for f, p in zip(frames, prefix):
        if f[0] != p[0] or not f[1].same_as(p[1]) or (f[0] == "if" and f[2] != p[2]):
            return False
    return True


def _same_cond(c: tuple, d: tuple) -> bool:
    import tvm_ffi

    return c[1] == d[1] and tvm_ffi.structural_equal(c[0], d[0])


def _same_conds(a: list[tuple], b: list[tuple]) -> bool:
    return len(a) == len(b) and all(any(_same_cond(c, d) for d in b) for c in a)


def _same_key(a: tuple, b: tuple) -> bool:
    import tvm_ffi

    return a[2] == b[2] and tvm_ffi.structural_equal(a[0], b[0]) and tvm_ffi.structural_equal(a[1], b[1])


def _local(key: tuple) -> tuple:
    return key[0], key[1], None


def _is_one_rank(cond: tuple) -> bool:
    """`rank == c` (taken): a statement one CTA of the cluster issues (a multicast try_cancel's)."""
    import tvm

    c = cond[0]
    return cond[1] and isinstance(c, tvm.tirx.EQ) and _is_rank_cond(c) and isinstance(c.b, tvm.tirx.IntImm)


def _is_rank_cond(cond: Any) -> bool:
    """A condition that reads the CTA's rank in its cluster (and nothing that varies by thread)."""
    names = [v.name for v in free_vars(cond)]
    return bool(names) and all(n.startswith("clusterCtaIdx") for n in names)


def visit_exprs(stmt: Any, fvisit: Any) -> None:
    """Call fvisit on every expression node under stmt (statements and expressions alike)."""
    import tvm
    import tvm_ffi

    def walk(node: Any) -> None:
        if node is None or isinstance(node, (str, int, float, bool)):
            return
        if isinstance(node, (list, tuple)) or type(node).__name__ == "Array":
            for n in node:
                walk(n)
            return
        if not isinstance(node, (tvm.ir.Node, tvm.tirx.Stmt)) and not hasattr(node, "__tvm_ffi_type_info__"):
            return
        fvisit(node)
        for name in ("seq", "body", "then_case", "else_case", "value", "condition", "args",
                     "indices", "a", "b", "extent", "min", "true_value", "false_value"):
            child = getattr(node, name, None)
            if child is not None and not inspect.ismethod(child):
                walk(child)

    walk(stmt)


def free_vars(e: Any) -> list[Any]:
    import tvm
    import tvm_ffi

    out: list[Any] = []
    visit_exprs(e, lambda n: out.append(n) if isinstance(n, tvm.tirx.Var) else None)
    return out
