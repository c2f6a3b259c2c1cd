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
# PTX that no Hopper GPU can run: tcgen05 (tensor memory and its MMA) and cta_group::2 need
# sm_100a; cluster launch control needs sm_100 (only its .multicast::cluster::all form needs
# sm_100a).
BLACKWELL_ONLY = re.compile(r"\b(?:tcgen05\.|clusterlaunchcontrol\.)|cta_group::2")
_FEATURES = (
    ("tcgen05.", "tcgen05 (sm_100a)"),
    ("cta_group::2", "cta_group::2 (sm_100a)"),
    ("clusterlaunchcontrol.", "cluster launch control (sm_100; its multicast form sm_100a)"),
)


def blackwell_only_features(ptx: str) -> list[str]:
    """The features of `ptx` that keep it off Hopper, described with the arch each needs."""
    found = {m.group(0) for m in BLACKWELL_ONLY.finditer(ptx)}
    return [desc for key, desc in _FEATURES if any(f.startswith(key) for f in found)]


# A label in front of an instruction ("$L__BB0_2:", "LAB_WAIT:"), but not a state space
# such as "shared::cta" (identifiers hold no '.', and '::' is no label).
_PTX_LABEL = re.compile(r"^[A-Za-z_$%][\w$]*\s*:(?!:)\s*")
_PTX_PREDICATE = re.compile(r"^@!?%?[\w$]+\s+")  # "@%p1 ", "@!%p1 ", "@p " (inline asm)


def ptx_instructions(ptx: str) -> list[str]:
    """Every instruction of PTX text, one string each, labels and guard predicates removed.

    Comments are dropped; statements are split on ';' and on braces, so that inline-assembly
    blocks (`{ .reg .pred p; setp...; @p tcgen05.commit...; }`) and labelled instructions
    (`$L__BB0_2: bar.sync 0;`, on one line or two) each count once. Directives (`.reg`,
    `.param`, ...) and the operand fragments of vector braces (`{%f1, %f2}`) are not
    instructions.
    """
    text = re.sub(r"/\*.*?\*/", " ", ptx, flags=re.S)
    text = "\n".join(ln.split("//")[0] for ln in text.splitlines())
    out = []
    for st in re.split(r"[;{}]", text):
        st = st.strip()
        while (m := _PTX_LABEL.match(st)) is not None:
            st = st[m.end():]
        m = _PTX_PREDICATE.match(st)
        if m is not None:
            st = st[m.end():]
        st = st.strip()
        if st and st[0] not in ".%,[" and not st[0].isdigit() and not st.startswith("-"):
            out.append(st)
    return out


def count_ptx(ptx: str, patterns: list[tuple[str, str]] = PTX_PATTERNS) -> dict[str, int]:
    """Static counts of instruction families in PTX: instructions, not lines (see ptx_instructions)."""
    body = ptx_instructions(ptx)
    counts = {}
    for label, rx in patterns:
        pat = re.compile(rx)
        counts[label] = sum(1 for ins in body if pat.match(ins))
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
