"""A kernel's PTX as a control-flow graph of instructions, and a forward scan over every path.

`entry(ptx)` reads the `.entry` of a PTX module into `Instruction`s: the statement without its
guard, the guard (`@p`, `@!p`) kept apart, and the successors of each instruction, with labels
resolved in the brace scope they were declared in (inline-asm blocks reuse names such as
`LAB_WAIT`). `scan(instructions, step, start)` runs a transfer function over every path of that
graph: the state at an instruction is the union of the states that reach it along any edge,
iterated until nothing changes. A conditional branch is followed both ways whatever its
predicate says, so every path the graph has is scanned, including paths no thread takes (a
thread that runs the producer's branch and then the consumer's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

_BRACE = re.compile(r"[{}]")
_LABEL = re.compile(r"([A-Za-z_$][\w$]*)\s*:(?!:)")
_GUARD = re.compile(r"@(!?)(%?[\w$]+)\s+")
_BRANCH = re.compile(r"^bra(?:\.uni)?\s+([\w$]+)")
_ENDS = re.compile(r"^(?:ret|exit|trap)\b")
_WAITS = re.compile(r"^(?:bar\.sync|bar\.red|barrier\.sync|barrier\.cta\.sync|barrier\.red|"
                    r"barrier\.cluster\.wait|mbarrier\.try_wait|mbarrier\.test_wait)\b")


@dataclass
class Instruction:
    """One PTX statement: its text without guard, its guard ('' when it always runs), successors."""

    text: str
    guard: str = ""
    scope: int = 0
    succ: list[int] = field(default_factory=list)
    cond: tuple | None = None   # a conditional branch on a stable condition: (key, value when taken)
    test: tuple | None = None   # the same, also for a condition no other branch tests

    @property
    def always(self) -> bool:
        """True when every thread that reaches it executes it (no guard)."""
        return not self.guard


def _strip_comments(ptx: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", ptx, flags=re.S)
    return "\n".join(ln.split("//")[0] for ln in text.splitlines())


def _bodies(text: str) -> dict[str, str]:
    """The body text of every `.entry` and `.func`, by name."""
    out: dict[str, str] = {}
    for m in re.finditer(r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)", text):
        start = text.find("{", m.end())
        if start < 0:
            continue
        depth, i = 0, len(text)
        for b in _BRACE.finditer(text, start):  # the body ends at the matching brace
            depth += 1 if b.group() == "{" else -1
            if depth == 0:
                i = b.start()
                break
        out[m.group(1)] = text[start + 1 : i]
    return out


def parse(body: str) -> list[Instruction]:
    """The statements of a body in program order, with block scopes, labels and branches resolved."""
    out: list[Instruction] = []
    labels: dict[tuple[int, str], int] = {}   # (scope, name) -> index of the next instruction
    parents: dict[int, int] = {0: -1}
    stack, next_scope, i, n = [0], 1, 0, len(body)
    pending: list[tuple[int, str]] = []       # branches to resolve: (instruction, label)
    while i < n:
        c = body[i]
        if c.isspace() or c == ";":
            i += 1
            continue
        if c == "{":
            parents[next_scope] = stack[-1]
            stack.append(next_scope)
            next_scope += 1
            i += 1
            continue
        if c == "}":
            if len(stack) > 1:
                stack.pop()
            i += 1
            continue
        m = _LABEL.match(body, i)
        if m:
            labels[(stack[-1], m.group(1))] = len(out)
            i = m.end()
            continue
        end = body.find(";", i)
        end = n if end < 0 else end
        st = " ".join(body[i:end].split())
        i = end + 1
        guard = ""
        g = _GUARD.match(st)
        if g:
            guard, st = g.group(0).strip(), st[g.end():]
        if not st or st.startswith((".", "%")):
            continue  # declarations
        out.append(Instruction(st, guard, stack[-1]))
        b = _BRANCH.match(st)
        if b:
            pending.append((len(out) - 1, b.group(1)))
    for k, ins in enumerate(out):
        if _BRANCH.match(ins.text) or ins.text.startswith("brx.idx"):
            continue
        if not (_ENDS.match(ins.text) and ins.always):
            ins.succ.append(k + 1)
    for k, name in pending:
        scope, target = out[k].scope, None
        while scope != -1 and target is None:
            target = labels.get((scope, name))
            scope = parents.get(scope, -1)
        out[k].succ.append(len(out) if target is None else target)
        if not out[k].always:
            out[k].succ.append(k + 1)
    everywhere = sorted(set(labels.values()))
    for ins in out:
        if ins.text.startswith("brx.idx"):  # an indirect branch may go to any label
            ins.succ.extend(everywhere)
    for ins in out:
        ins.succ = sorted({s for s in ins.succ if s < len(out)})
    _conditions(out)
    return out


_SETP = re.compile(r"^setp\.(\w+)\.(\w+)\s+(%[\w$]+)\s*,\s*([^,\s]+)\s*,\s*([^,\s]+)$")
_PURE = r"^(?:mov|cvt|add|sub|mul|mad|and|or|xor|not|shl|shr|min|max|div|rem|selp|ld\.param)\b"
_DEST = re.compile(r"^[\w.:]+\s+(%[\w$]+)")


def _conditions(out: list[Instruction]) -> None:
    """Mark the conditional branches whose condition has one value for the whole run of a thread.

    A condition is stable when it is a `setp` comparing immediates and registers that are each
    written once, outside every loop (the warp's role, computed at the start), or that hold the
    result of `elect.sync` (taken to elect the same lane each time: a kernel whose elected lane
    issues bulk stores and commits, which are per thread, relies on it too). Two branches on the
    same comparison of the same operands then take the same direction on any path of one thread.
    """
    defs: dict[str, list[int]] = {}
    for k, ins in enumerate(out):
        m = _DEST.match(ins.text)
        if m and not ins.text.startswith(("st.", "bra", "call", "mbarrier", "cp.", "tcgen05", "bar")):
            defs.setdefault(m.group(1), []).append(k)
    loops = [(t, k) for k, ins in enumerate(out) for t in ins.succ if t <= k]

    def operand(x: str) -> str | None:
        if not x.startswith("%"):
            return x                                  # an immediate
        where = defs.get(x, [])
        texts = [out[d] for d in where]
        if (len(where) == 2 and texts[0].text == f"mov.b32 {x}, 0" and texts[1].guard
                and texts[1].text.startswith(f"mov.s32 {x}, 1")
                and any(i.text.startswith("elect.sync") for i in out[max(0, where[1] - 3): where[1]])):
            return "elect"
        return x if stable(x, set()) else None

    def stable(x: str, seen: set) -> bool:
        """One unguarded write, outside loops or of registers that are themselves stable."""
        where = defs.get(x, [])
        if len(where) != 1 or out[where[0]].guard or x in seen:
            return False
        if not any(t <= where[0] <= k for t, k in loops):
            return True
        op = out[where[0]].text
        if not re.match(_PURE, op):
            return False
        seen.add(x)
        return all(stable(r, seen) for r in re.findall(r"%[\w$]+(?:\.[xyz])?", op.split(None, 1)[1])[1:]
                   if not r.startswith(("%tid", "%ntid", "%ctaid", "%nctaid")))

    for ins in out:
        g = re.match(r"^@(!?)(%[\w$]+)$", ins.guard)
        if not (g and _BRANCH.match(ins.text)) or len(ins.succ) != 2:
            continue
        where = defs.get(g.group(2), [])
        m = _SETP.match(out[where[0]].text) if len(where) == 1 else None
        if not m or m.group(3) != g.group(2):
            continue
        a, b = operand(m.group(4)), operand(m.group(5))
        if a is None or b is None:
            continue
        cmp, value = m.group(1), not g.group(1)
        if cmp == "ne":
            cmp, value = "eq", not value
        ins.cond = ins.test = ((cmp, m.group(2).lstrip("sub"), a, b), value)
    tested: dict[tuple, int] = {}
    for ins in out:
        if ins.cond is not None:
            tested[ins.cond[0]] = tested.get(ins.cond[0], 0) + 1
    for ins in out:  # a condition tested once correlates nothing: forget it
        if ins.cond is not None and tested[ins.cond[0]] < 2:
            ins.cond = None


def functions(ptx: str) -> dict[str, list[str]]:
    """The instructions of every `.entry` and `.func` of the PTX, by name, in program order."""
    return {name: [i.text for i in parse(body)] for name, body in _bodies(_strip_comments(ptx)).items()}


def entry(ptx: str) -> tuple[str, list[Instruction]]:
    """The kernel's entry and its instructions, with calls to helpers that wait marked as waits."""
    text = _strip_comments(ptx)
    bodies = _bodies(text)
    entries = re.findall(r"\.entry\s+([\w$]+)", text)
    if not entries:
        raise ValueError("no .entry in this PTX")
    waiting = {name for name, body in bodies.items() if name != entries[0]
               and any(_WAITS.match(i.text) for i in parse(body))}
    ins = parse(bodies[entries[0]])
    for i in ins:
        m = (re.match(r"^call(?:\.uni)?\s.*?([\w$]+)\s*,", i.text)
             or re.match(r"^call(?:\.uni)?\s+([\w$]+)", i.text))
        if m and m.group(1) in waiting:
            i.text = f"mbarrier.try_wait (in {m.group(1)}) {i.text}"
    return entries[0], ins


State = frozenset
Step = Callable[[int, Instruction, set, bool], None]


_MOST_ASSUMED = 8  # conditions kept per hazard; past that a path assumes nothing more (still sound)


def _along(ins: list[Instruction], k: int, s: int, state: set) -> State:
    """The state that flows from instruction k to s: along a stable branch, each hazard (a tuple
    whose last item is the frozenset of conditions assumed since it was opened) flows only where
    its assumptions allow, and assumes the edge's direction from there on."""
    cond = ins[k].cond
    if cond is None or ins[k].succ == [k + 1]:
        return state   # unchanged: the caller unions it into a new state and never keeps this set
    key, taken = cond
    value = taken if s != k + 1 else not taken
    return State(e[:-1] + ((e[-1] | {(key, value)}) if len(e[-1]) < _MOST_ASSUMED else e[-1],)
                 for e in state if (key, not value) not in e[-1])


def scan(ins: list[Instruction], step: Step, start: Iterable = (), fixed: dict[int, bool] | None = None,
         inert: list[bool] | None = None) -> dict[int, State]:
    """Run `step(k, instruction, state, final)` (it mutates the state) over every path, to a fixpoint.

    `fixed` maps branches to the direction every thread of one role takes (see `ptxroles.roles`): only
    that edge is followed. The state is a set of tuples whose last item is a frozenset: the stable conditions (see
    `_conditions`) assumed on the path since the tuple was added; `step` adds tuples with an
    empty one and keeps it when it rewrites a tuple.

    The state entering an instruction is the union of the states leaving its predecessors; the
    state only grows, so the loop ends. `step` is then called once more on every reached
    instruction with its final state and `final=True`: findings are recorded in that pass.

    `inert[k]`, when given, says that `step` neither changes any state at instruction k nor
    records anything there (the caller's promise): such an instruction that only falls through
    passes its state on as it is, without a call or a copy. Returns the state entering each
    reached instruction.
    """
    if not ins:
        return {}
    into: dict[int, State] = {0: State(start)}
    work = [0]
    while work:
        k = work.pop()
        if inert is not None and inert[k] and ins[k].succ == [k + 1]:
            before = into.get(k + 1)
            if before is None:
                into[k + 1] = into[k]
                work.append(k + 1)
            elif not into[k] <= before:
                into[k + 1] = before | into[k]
                work.append(k + 1)
            continue
        state = set(into[k])
        step(k, ins[k], state, False)
        for s in ins[k].succ:
            if fixed and k in fixed and len(ins[k].succ) == 2 and (s != k + 1) != fixed[k]:
                continue  # every thread of this role takes the other edge
            flows = _along(ins, k, s, state)
            before = into.get(s)
            if before is None:
                into[s] = State(flows)
                work.append(s)
            else:
                merged = before | flows
                if len(merged) != len(before):   # the union only grows: a new element, or none
                    into[s] = merged
                    work.append(s)
    for k in sorted(into):
        if inert is None or not inert[k]:
            step(k, ins[k], set(into[k]), True)
    return into
