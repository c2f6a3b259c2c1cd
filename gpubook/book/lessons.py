"""Deliberate failures as lessons: show why TIRx refused a kernel, without the traceback."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable

WIDTH = 88  # characters: what a code-cell output shows without scrolling


@dataclass
class Refusal:
    """Why lowering failed: the operation, and each dispatch variant's reason for declining."""

    headline: str  # e.g. "TIRx schedule dispatch failed: op=tirx.tile.gemm target=cuda"
    op: str | None = None  # e.g. "tirx.tile.gemm"
    reasons: list[tuple[str, str]] = field(default_factory=list)  # (variant, why it declined)
    note: str | None = None  # a reason that names no variant ("no variant named ... is registered")
    width: int = WIDTH

    def lines(self) -> list[str]:
        """The report, wrapped to `width` columns."""
        wrap = lambda text, indent: textwrap.wrap(  # noqa: E731 - a local one-liner
            text, self.width, initial_indent=indent, subsequent_indent=indent + "  ",
            break_long_words=True, break_on_hyphens=False)
        head = f"TIRx could not lower {self.op}" if self.op else self.headline
        out = wrap(head + ":", "")
        for variant, why in self.reasons:
            out += wrap(f"variant {variant}:", "  ") + wrap(why, "    ")
        if self.note:
            out += wrap(self.note, "  ")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    __repr__ = __str__

    def mentions(self, *words: str) -> bool:
        """True when every word appears in the reasons (case-insensitive)."""
        text = " ".join([why for _, why in self.reasons] + [self.note or ""]).lower()
        return all(w.lower() in text for w in words)


def _variant_name(cell: str) -> str:
    """'mma.m16n8k* (prio=10)' -> 'mma.m16n8k*'."""
    return re.sub(r"\s*\(prio=-?\d+\)\s*$", "", cell.strip())


def _reason(summary: str) -> str:
    """A table row's first line without the dispatcher's prefixes."""
    s = summary.strip()
    s = re.sub(r"^declined\s*[—-]\s*", "", s)
    s = re.sub(r"^exception\s*[—-]\s*", "", s)
    m = re.match(r"^rejected:\s*(\S+)\s*[—-]\s*(.*)$", s)
    if m:  # a predicate of the variant said no
        return f"{m.group(2)} (condition {m.group(1)})"
    return re.sub(r"^rejected:\s*", "condition failed: ", s)


def parse_failure(text: str) -> Refusal:
    """Read TIRx's error text: the dispatch report table if there is one, else the first lines."""
    text = re.split(r"\nError in pass|\nTraceback \(most recent call last\)|\nStack trace", text)[0]
    lines = text.splitlines()
    headline = next((ln.strip() for ln in lines if ln.strip()), "lowering failed")
    op = re.search(r"\bop=(\S+)", headline)
    refusal = Refusal(headline, op.group(1) if op else None)
    head = next((ln for ln in lines if re.match(r"^\|\s*Variant\s*\|", ln)), None)
    if head is None:  # no table: a failure that is not a dispatch report
        rest = [ln.strip() for ln in lines[1:] if ln.strip() and not ln.startswith("+")]
        refusal.note = " ".join(rest) if rest else None
        return _with_known_variants(refusal)
    col = head.index("|", 1)  # where the Variant column ends
    for ln in lines:
        if not ln.startswith("| ") or ln is head:
            continue
        variant, cell = ln[1:col].strip(), ln[col + 1:].rstrip().rstrip("|").strip()
        if variant:  # a row's first line is the reason; its other lines, the opcall and traceback
            refusal.reasons.append((_variant_name(variant), _reason(cell)))
    notes = [ln.strip() for ln in lines if ln.strip() and not ln.startswith(("|", "+"))
             and ln.strip() != headline]
    refusal.note = " ".join(notes) if notes else None
    return _with_known_variants(refusal)


def _with_known_variants(refusal: Refusal) -> Refusal:
    """A request for a variant that does not exist: add the ones that do."""
    if refusal.note and "no variant named" in refusal.note and refusal.op:
        known = registered_variants(refusal.op)
        if known:
            refusal.note += "; the registered ones: " + ", ".join(known)
    return refusal


def registered_variants(op: str, target: str = "cuda") -> list[str]:
    """The dispatch variants TIRx has registered for an op such as 'tirx.tile.gemm_async'."""
    try:
        from tvm.tirx.operator.tile_primitive.dispatcher import list_registered_schedules
    except ImportError:  # the parser is usable without TVM
        return []
    return list(list_registered_schedules().get(op, {}).get(target, []))


def explain_failure(fn: Callable[..., Any], *args: Any, width: int = WIDTH, **kwargs: Any) -> Refusal:
    """Call fn (e.g. gb.build), which must fail; return the reason TIRx gave, wrapped for reading.

    A call that succeeds raises AssertionError: a lesson about a failure must fail.
    """
    try:
        fn(*args, **kwargs)
    except Exception as err:  # TIRx reports lowering failures as RuntimeError or TVMError
        refusal = parse_failure(str(err))
        refusal.width = width
        return refusal
    raise AssertionError(f"{getattr(fn, '__name__', fn)} was expected to fail, and it succeeded")
