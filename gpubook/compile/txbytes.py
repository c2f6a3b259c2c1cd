"""Check, at build time, every `mbarrier.arrive.expect_tx` against the copies that complete on its barrier.

An `expect_tx` that announces more bytes than land on its barrier hangs the kernel; one that
announces fewer lets the phase complete while a copy is still writing. Neither shows in a
comparison of instruction counts, so `gpubook.build` runs this check on the lowered IR of every
kernel (`analyze(host, device)`) and fails the build on a disagreement (`enforce`).

What it reads. The device function of the lowered module: each `mbarrier.arrive.expect_tx`
(its barrier and byte count), each TMA load `cp.async.bulk.tensor` global -> shared with
`mbarrier::complete_tx::bytes` (its tensor map, barrier, `cta_group`, multicast mask), each
non-tensor `cp.async.bulk` load (its size operand) and each `clusterlaunchcontrol.try_cancel`
(16 bytes). The host function: the `tensormap_encode_tiled` call of every tensor map the kernel
is launched with, whose box dimensions, element strides and element type give a box's bytes
(`prod(ceil(box_i / stride_i)) * element size`; a box that overhangs the tensor still delivers
all of them). A barrier is a shared-memory word: its buffer's data pointer plus its byte offset,
compared by structural equality after simplification; a barrier mapped into rank `r`
(`remote_view(r)`, `mapa`) is the same word in CTA `r`.

What it proves. Events are grouped by the innermost loop around them (or the whole kernel).
Within a group, a barrier's instance ends where a buffer that its index reads is stored to (a
pipeline state's `advance`): the bytes the `expect_tx`s of that instance announce equal the
bytes of the copies on it between those stores, where a copy counts

- once per iteration of any constant-extent loop between the group's loop and the copy;
- times the CTAs that issue it into this barrier: a multicast load with constant mask `m`
  issued by every CTA that `m` names (no rank condition around it) delivers `popcount(m)`
  boxes to each of them; a `cta_group::2` load whose barrier is rank 0's, issued by both
  CTAs of the pair, delivers 2 boxes to the leader's barrier, whose `expect_tx` must then
  be posted under a rank condition (the leader only); a multicast `try_cancel` issued under
  `rank == c` delivers its 16 bytes once to the barrier of every CTA of the cluster.

A copy is counted for an `expect_tx` only when every condition around the copy (below the
group's loop) is also around the `expect_tx`, so the copy is issued whenever the bytes are
announced (but for that `try_cancel`); extra conditions around the `expect_tx` are accepted
only when they test the CTA's rank in its cluster.

What it cannot see, reported as "not judged: <why>" in the kernel's facts rather than passed:
a byte count or a multicast mask known only at run time; copies on the barrier issued in
another loop body or another role's branch than its `expect_tx` (a loop-carried pairing);
copies under a condition the `expect_tx` is not under; a multicast load under a rank
condition, or combined with `cta_group::2`; a barrier in a CTA other than 0 or the own one;
loops of run-time extent between the `expect_tx` and a copy; packed (4-bit) tensor maps; a
copy issued after the barrier's index changed (another instance, with no `expect_tx` of its
own). It assumes that each `expect_tx` and each copy is executed by one thread (the book's kernels issue
both from one elected thread) and that the CTAs of a cluster run the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .txjudge import free_vars, judge, visit_exprs


SOURCES = ("txbytes.py", "txjudge.py")  # the check's sources, part of the build cache's key


class TxBytesError(RuntimeError):
    """An `expect_tx` byte count disagrees with the copies that complete on its barrier."""


@dataclass
class _Event:
    kind: str                 # "expect" | "load"
    key: tuple | None         # (data var, byte offset, rank or None); None when not resolved
    label: str                # the barrier as written
    frames: list              # enclosing ("for", node) / ("if", cond, branch) frames
    seq: int
    nbytes: int | None = None  # expect: announced; load: one box (or the size operand)
    what: str = ""            # load: "x box 64x64 float16 = 8192 B"
    mask: Any = None          # load: multicast mask (IntImm or expr) when multicast
    cta_group: int = 1
    why: str = ""             # a reason the event itself cannot be judged


def analyze(host: Any, device: Any) -> dict[str, Any]:
    """The check's record: {"barriers": [...], "not_judged": [...], "mismatches": [...]}; {} when
    the kernel posts no expect_tx."""
    import tvm

    maps = _tensor_maps(host, device)
    events: list[_Event] = []
    stores: list[tuple[int, Any, list]] = []
    for _, func in device.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc):
            _Walker(maps, events, stores).stmt(func.body, [])
    expects = [e for e in events if e.kind == "expect"]
    if not expects:
        return {}
    return judge(expects, [e for e in events if e.kind == "load"], stores)


def enforce(record: dict[str, Any], name: str, planted: bool = False) -> None:
    """Fail on a mismatch; with `planted` (a kernel built with a deliberate expect_tx bug),
    fail when there is none."""
    bad = record.get("mismatches", []) if record else []
    if planted:
        if not bad:
            raise TxBytesError(f"{name} is built as a planted expect_tx mismatch, but the check finds "
                               f"none ({summary(record) or 'the kernel posts no expect_tx'})")
        return
    if bad:
        raise TxBytesError(f"{name}: expect_tx byte count disagrees with the copies that complete on "
                           "its barrier:\n  " + "\n  ".join(bad))


def enforced(kernel: Any, planted: bool = False) -> Any:
    """`kernel`, once its expect_tx record passes `enforce` (what `gpubook.build` returns).

    `gb.build(..., expect_tx_mismatch=True)` passes `planted`: a kernel with a deliberate
    expect_tx bug (a chapter's hang demonstration) builds only if the check finds the mismatch.
    """
    enforce(kernel.expect_tx, kernel.name, planted)
    return kernel


def report_line(record: dict[str, Any]) -> str:
    """The report's line for the record ("" when the kernel posts no expect_tx)."""
    return f"\n  {summary(record)}" if record else ""


def summary(record: dict[str, Any]) -> str:
    """One line for the kernel's report, e.g.
    "expect_tx: 2 barriers, bytes match the copies (16 B, 65536 B per phase)"."""
    if not record:
        return ""
    bars = record["barriers"]
    matched = [b for b in bars if b["verdict"] == "match"]
    parts = []
    if matched:
        sizes, n = sorted({b["expected"] for b in matched}), len({b["barrier"] for b in matched})
        parts.append(f"{n} barrier{'s' * (n > 1)}, bytes match the copies "
                     f"({', '.join(f'{s} B' for s in sizes)} per phase)")
    if record["mismatches"]:
        parts.append(f"{len(record['mismatches'])} MISMATCH: " + "; ".join(record["mismatches"]))
    parts += [f"not judged: {why}" for why in record["not_judged"]]
    return "expect_tx: " + "; ".join(parts)


# -- the host side: what each tensor map's box holds -------------------------------------------
def _tensor_maps(host: Any, device: Any) -> dict[str, tuple[int | None, str]]:
    """Device tensor-map parameter name -> (bytes of one box or None, description)."""
    import tvm

    encoded: dict[Any, tuple[int | None, str]] = {}
    launches: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, tvm.ir.Call) and isinstance(node.op, tvm.ir.Op):
            if node.op.name == "tirx.tensormap_encode_tiled":
                encoded[node.args[0]] = _box(node)
            elif node.op.name.endswith("call_ffi_kernel"):
                launches.append(node)

    for _, func in host.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc):
            visit_exprs(func.body, visit)
    maps: dict[str, tuple[int | None, str]] = {}
    for gv, func in device.functions.items():
        params = list(func.params)
        for call in launches:
            if str(call.args[0].value) != gv.name_hint:
                continue
            for p, arg in zip(params, call.args[1:]):
                for var, box in encoded.items():
                    if var.same_as(arg) or (hasattr(arg, "name") and arg.name == var.name):
                        maps[p.name] = box
        for p in params:  # a map not matched by position: by name
            for var, box in encoded.items():
                if var.name == p.name:
                    maps.setdefault(p.name, box)
    return maps


def _box(call: Any) -> tuple[int | None, str]:
    import tvm

    attrs = call.attrs
    rank = int(attrs.rank)
    args = [a for a in call.args[2:]]
    box, estr = args[2 * rank - 1 : 3 * rank - 1], args[3 * rank - 1 : 4 * rank - 1]
    tensor = str(call.args[0].name).removesuffix("_tensormap")
    dtype = str(attrs.descriptor_dtype)
    if int(attrs.force_cu_dtype) != -1 or not all(isinstance(a, tvm.tirx.IntImm) for a in box + estr):
        return None, f"{tensor}: a packed or run-time box"
    dims = [int(b) for b in box]
    count = 1
    for b, s in zip(dims, (int(e) for e in estr)):
        count *= -(-b // s)
    nbytes = count * tvm.DataType(dtype).bits // 8
    shape = "x".join(str(d) for d in reversed(dims))  # the driver lists the innermost dimension first
    return nbytes, f"{tensor} box {shape} {dtype} = {nbytes} B"


# -- the device side: the events in program order ----------------------------------------------
class _Walker:
    def __init__(self, maps: dict, events: list[_Event], stores: list) -> None:
        self.maps, self.events, self.stores = maps, events, stores
        self.binds: list[tuple] = []   # (Var, bound value)
        self.decls: list[tuple] = []   # (buffer, the data pointer it was declared on)
        self.mapa: list[tuple] = []    # (local scratch buffer, source address, rank) of each mapa
        self.seq = 0

    @staticmethod
    def _find(pairs: list[tuple], node: Any) -> tuple | None:
        return next((p[1:] for p in reversed(pairs) if p[0].same_as(node)), None)

    def stmt(self, s: Any, frames: list) -> None:
        import tvm

        t = tvm.tirx
        self.seq += 1
        if isinstance(s, t.SeqStmt):
            for x in s.seq:
                self.stmt(x, frames)
        elif isinstance(s, (t.For, t.While)):
            self.stmt(s.body, frames + [("for", s)])
        elif isinstance(s, t.IfThenElse):
            self.stmt(s.then_case, frames + [("if", s.condition, True)])
            if s.else_case is not None:
                self.stmt(s.else_case, frames + [("if", s.condition, False)])
        elif isinstance(s, t.AttrStmt):
            self.stmt(s.body, frames)
        elif isinstance(s, t.Bind):
            self.binds.append((s.var, s.value))
        elif isinstance(s, t.DeclBuffer):
            self.decls.append((s.buffer, s.data))
        elif isinstance(s, t.BufferStore):
            self.stores.append((self.seq, s.buffer, frames))
        elif isinstance(s, t.Evaluate) and isinstance(s.value, tvm.ir.Call):
            self.call(s.value, frames)
        elif hasattr(s, "body") and s.body is not None:
            self.stmt(s.body, frames)

    def call(self, c: Any, frames: list) -> None:
        import tvm

        words = {str(a.value) for a in c.args if isinstance(a, tvm.ir.StringImm)}
        ops = [a for a in c.args if not isinstance(a, tvm.ir.StringImm)]
        name = c.op.name if isinstance(c.op, tvm.ir.Op) else ""
        if "mapa" in name or "mapa" in words:  # mapa(dst scratch, source address, rank)
            dst = ops[0]
            if isinstance(dst, tvm.ir.TensorLoad):
                self.mapa.append((dst.source, ops[1], ops[2]))
            return
        if {"arrive", "expect_tx"} <= words:
            nbytes = ops[1] if len(ops) > 1 else None
            n = int(nbytes) if isinstance(nbytes, tvm.tirx.IntImm) else None
            self._add("expect", ops[0], frames, nbytes=n,
                      why="" if n is not None else f"a byte count known only at run time ({nbytes})")
        elif {"async", "bulk", "mbarrier::complete_tx::bytes"} <= words and "global" in words:
            self._load(ops, words, frames)
        elif "try_cancel" in words or "try_cancel" in name:
            self._add("load", ops[1] if len(ops) > 1 else ops[0], frames, nbytes=16,
                      what="try_cancel response = 16 B",
                      mask=-1 if any("multicast" in w for w in words) else None)

    def _load(self, ops: list, words: set, frames: list) -> None:
        import tvm

        group = 2 if "cta_group::2" in words else 1
        multicast = any(w.startswith("multicast::cluster") for w in words)
        if "tensor" in words:
            rank = next(int(w[0]) for w in words if len(w) == 2 and w.endswith("d") and w[0].isdigit())
            tmap = [v for v in free_vars(ops[1]) if v.name in self.maps]
            nbytes, what = self.maps[tmap[0].name] if tmap else (None, "a tensor map not found on the host")
            mbar = ops[2 + rank]
            mask = ops[3 + rank] if multicast else None
        else:
            size = ops[2]
            nbytes = int(size) if isinstance(size, tvm.tirx.IntImm) else None
            what = f"bulk copy = {nbytes} B" if nbytes is not None else f"bulk copy of {size} B"
            mbar, mask = ops[3], (ops[4] if multicast else None)
        self._add("load", mbar, frames, nbytes=nbytes, what=what, mask=mask, cta_group=group,
                  why="" if nbytes is not None else what)

    def _add(self, kind: str, addr: Any, frames: list, **kw: Any) -> None:
        self.events.append(_Event(kind, self._key(addr), _label(addr), list(frames), self.seq, **kw))

    def _key(self, addr: Any) -> tuple | None:
        """(the data pointer, byte offset, rank or None) of a barrier address expression."""
        import tvm
        from tvm.sym import Analyzer

        rank = None
        for _ in range(8):
            bound = self._find(self.binds, addr) if isinstance(addr, tvm.tirx.Var) else None
            mapped = self._find(self.mapa, addr.source) if isinstance(addr, tvm.ir.TensorLoad) else None
            if bound is not None:
                addr = bound[0]
            elif isinstance(addr, tvm.ir.Call) and addr.op.name in (
                    "tirx.cuda.cvta_generic_to_shared", "tirx.reinterpret") and len(addr.args) >= 1:
                addr = addr.args[-1]
            elif mapped is not None and rank is None:  # a mapa'd 32-bit address
                addr, rank = mapped
            else:
                break
        if not (isinstance(addr, tvm.ir.Call) and addr.op.name == "tirx.address_of"):
            return None
        load = addr.args[0]
        if not (isinstance(load, tvm.ir.TensorLoad) and len(load.indices) == 1):
            return None
        buf = load.source
        offset = (buf.elem_offset + load.indices[0]) * (tvm.DataType(str(buf.dtype)).bits // 8)
        declared = self._find(self.decls, buf)
        data = declared[0] if declared is not None else buf
        view = self._find(self.binds, data) if isinstance(data, tvm.tirx.Var) else None
        if view is not None:  # a remote view: reinterpret(scratch[0]) after mapa.u64 into scratch
            scratch = [ld for ld in _loads(view[0]) if self._find(self.mapa, ld.source) is not None]
            if not scratch or rank is not None:
                return None
            src, rank = self._find(self.mapa, scratch[0].source)
            base = self._key(src)
            if base is None or base[2] is not None:
                return None
            data, offset = base[0], offset + base[1]
        if rank is not None and not isinstance(rank, tvm.tirx.IntImm):
            return None
        return data, Analyzer().simplify(offset), None if rank is None else int(rank)


def _loads(e: Any) -> list[Any]:
    import tvm

    out: list[Any] = []
    visit_exprs(e, lambda n: out.append(n) if isinstance(n, tvm.ir.TensorLoad) else None)
    return out


def _label(addr: Any) -> str:
    text = str(addr)
    for wrap in ("T.cuda.cvta_generic_to_shared(", "T.address_of("):
        while text.startswith(wrap) and text.endswith(")"):
            text = text[len(wrap):-1]
    return text

