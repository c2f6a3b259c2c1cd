"""Static facts of a compiled kernel, read from its PTX, its cubin and the launch TVM generated."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Instruction families the book's lessons talk about: (label, regex on PTX instruction lines).
PTX_PATTERNS: list[tuple[str, str]] = [
    ("ld.global", r"ld\.global\.(?!(?:\w+\.)*v[248]\.)"),  # scalar loads
    ("ld.global.v2", r"ld\.global\.(?:\w+\.)*v2\."),
    ("ld.global.v4", r"ld\.global\.(?:\w+\.)*v4\."),
    ("st.global", r"st\.global\.(?!(?:\w+\.)*v[248]\.)"),
    ("st.global.v2", r"st\.global\.(?:\w+\.)*v2\."),
    ("st.global.v4", r"st\.global\.(?:\w+\.)*v4\."),
    ("ld.shared", r"ld\.shared\."),
    ("st.shared", r"st\.shared\."),
    ("bar.sync", r"(?:bar|barrier)\.(?:cta\.)?sync\b"),
    ("shfl.sync", r"shfl\.sync\."),
    ("cp.async", r"cp\.async\.(?:ca|cg)\."),
    ("TMA load", r"cp\.async\.bulk\.tensor\.\dd\.shared::\w+\.global"),
    ("TMA store", r"cp\.async\.bulk\.tensor\.\dd\.global\.shared"),
    ("mbarrier wait", r"mbarrier\.(?:try_wait|test_wait)"),
    ("ldmatrix", r"ldmatrix\."),
    ("stmatrix", r"stmatrix\."),
    ("mma.sync", r"mma\.sync\."),
    ("wgmma", r"wgmma\.mma_async\."),
    ("tcgen05.mma", r"tcgen05\.mma\."),
    ("tcgen05.ld", r"tcgen05\.ld\."),
    ("tcgen05.st", r"tcgen05\.st\."),
    ("tcgen05.alloc", r"tcgen05\.alloc\."),
    ("tcgen05.commit", r"tcgen05\.commit\."),
]
# PTX that only a Blackwell datacenter GPU (sm_100a) can run.
BLACKWELL_ONLY = re.compile(r"\b(?:tcgen05\.|clusterlaunchcontrol\.)|cta_group::2")


def count_ptx(ptx: str, patterns: list[tuple[str, str]] = PTX_PATTERNS) -> dict[str, int]:
    """Static counts of instruction families in PTX (instruction lines only, comments dropped)."""
    # Inline assembly arrives as `{ .reg .pred p; setp...; tcgen05.mma...; }` on one line:
    # split statements on ';' and braces so that each instruction is matched on its own.
    stmts = re.split(r"[;{}]", "\n".join(ln.split("//")[0] for ln in ptx.splitlines()))
    # A label (`LAB_WAIT:`) may open the statement of the instruction it marks.
    stmts = [re.sub(r"^(?:\s*[$\w]+:)+", "", st) for st in stmts]
    body = [st.strip() for st in stmts if st.strip() and not st.strip().startswith(".")]
    counts = {}
    for label, rx in patterns:
        pat = re.compile(r"^(?:@!?%\w+\s+)?" + rx)
        counts[label] = sum(1 for ln in body if pat.search(ln))
    return counts


def sass_instructions(sass: str) -> list[str]:
    """The opcodes (with modifiers) of a cuobjdump -sass listing, in order."""
    out = []
    for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass):
        out.append(m.group(1))
    return out


def count_sass(sass: str) -> dict[str, int]:
    """Counts of SASS opcodes (without modifiers), NOPs and the trailing BRA dropped."""
    counts: dict[str, int] = {}
    for op in sass_instructions(sass):
        base = op.split(".")[0]
        if base != "NOP":
            counts[base] = counts.get(base, 0) + 1
    return counts


def parse_resource_usage(text: str) -> dict[str, dict[str, int]]:
    """cuobjdump --dump-resource-usage output -> {kernel: {'REG': .., 'SHARED': .., ...}}."""
    out: dict[str, dict[str, int]] = {}
    for m in re.finditer(r"Function (\S+):\s*\n\s*(.*)", text):
        out[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+(?:\[\d+\])?):(\d+)", m.group(2))}
    return out


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


@dataclass
class Launch:
    """Grid, block, cluster and dynamic shared memory of one device kernel."""

    kernel: str
    grid: tuple[int, ...] = (1,)
    block: tuple[int, ...] = (1,)
    cluster: tuple[int, ...] | None = None
    dyn_smem: int = 0
    extra: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        g = "×".join(map(str, self.grid))
        b = "×".join(map(str, self.block))
        s = f"grid {g} · block {b}"
        if self.cluster:
            s += f" · cluster {'×'.join(map(str, self.cluster))}"
        return s


def parse_launches(host_script: str) -> list[Launch]:
    """Read each T.call_ffi_kernel(...) of the lowered host code into a Launch."""
    launches = []
    for m in re.finditer(r'T\.call_ffi_kernel\("(\w+)", (.*?), launch_params=\[(.*?)\]', host_script):
        names = [n.strip().strip('"') for n in m.group(3).split(",")]
        values = _split_top(m.group(2))[-len(names):]
        dims: dict[str, list[int]] = {"blockIdx": [1, 1, 1], "threadIdx": [1, 1, 1], "clusterIdx": []}
        la = Launch(m.group(1))
        for n, v in zip(names, values):
            try:
                iv = int(v)
            except ValueError:
                la.extra[n] = v
                continue
            if n == "tirx.use_dyn_shared_memory":
                la.dyn_smem = iv
            elif n.startswith(("blockIdx.", "threadIdx.")):
                dims[n.split(".")[0]]["xyz".index(n[-1])] = iv
            elif "cluster" in n:
                dims["clusterIdx"].append(iv)
            else:
                la.extra[n] = v

        def trim(d: list[int]) -> tuple[int, ...]:
            while len(d) > 1 and d[-1] == 1:
                d = d[:-1]
            return tuple(d)

        la.grid, la.block = trim(dims["blockIdx"]), trim(dims["threadIdx"])
        la.cluster = tuple(dims["clusterIdx"]) or None
        launches.append(la)
    return launches
