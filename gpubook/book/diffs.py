"""What changed from one function to the next, as a reader takes it in: a unified diff with three
lines of context, the changed tokens marked inside each replaced line, and no more than
`VISIBLE` lines shown before the rest of the hunks fold away.

The diff is HTML (the classes of Pygments' diff lexer: ``gd`` removed, ``gi`` added, ``gu`` a
hunk header, inside ``div.highlight-diff``, which the book's stylesheet colours), with each
changed token inside a removed or added line wrapped in ``<del>`` or ``<ins>``
(``gpubook-diff-x``). Every line keeps its ``-``/``+``/space marker, so the diff reads as one
in a plain notebook too, and the object's text form is the unified diff itself.
"""

from __future__ import annotations

import difflib
import functools
import html
import re
from dataclasses import dataclass, field
from typing import Sequence

VISIBLE = 40          # diff lines shown before the rest folds
CONTEXT = 3           # unchanged lines around each change
PAIR_RATIO = 0.5      # a removed and an added line this alike (token ratio) are one line changed
MARK = "gpubook-diff-x"
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def tokens(line: str) -> list[str]:
    """A line as identifiers and numbers, runs of white space, and single punctuation marks."""
    return _TOKEN.findall(line)


def unified(a: Sequence[str], b: Sequence[str], na: str, nb: str, context: int = CONTEXT) -> list[str]:
    """The unified diff of two lists of lines, as lines."""
    return list(difflib.unified_diff(list(a), list(b), fromfile=na, tofile=nb, n=context, lineterm=""))


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, tokens(a.strip()), tokens(b.strip()), autojunk=False).ratio()


def pair_lines(removed: Sequence[str], added: Sequence[str]) -> list[tuple[int, int]]:
    """(i, j) pairs of a removed line and the added line that replaced it, in order: the most
    alike pair first (at least PAIR_RATIO), then the same on either side of it."""
    pairs: list[tuple[int, int]] = []
    ratio = functools.lru_cache(maxsize=None)(lambda i, j: _ratio(removed[i], added[j]))

    def walk(r0: int, r1: int, a0: int, a1: int) -> None:
        scored = [(ratio(i, j), -i, -j) for i in range(r0, r1) for j in range(a0, a1)]
        if not scored or max(scored)[0] < PAIR_RATIO:
            return
        _, i, j = max(scored)
        walk(r0, -i, a0, -j)
        pairs.append((-i, -j))
        walk(-i + 1, r1, -j + 1, a1)

    walk(0, len(removed), 0, len(added))
    return pairs


def _marked(toks: Sequence[str], spans: Sequence[tuple[int, int]], tag: str) -> str:
    """The tokens as escaped HTML, the runs `spans` (token index ranges) inside <tag>."""
    out, k = [], 0
    for lo, hi in spans:
        out.append(html.escape("".join(toks[k:lo])))
        out.append(f'<{tag} class="{MARK}">{html.escape("".join(toks[lo:hi]))}</{tag}>')
        k = hi
    out.append(html.escape("".join(toks[k:])))
    return "".join(out)


def changed_tokens(old: str, new: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The token runs of `old` that went and of `new` that came: (old spans, new spans), each a
    list of (first token, past the last) indices into ``tokens(old)`` / ``tokens(new)``."""
    ta, tb = tokens(old), tokens(new)
    gone: list[tuple[int, int]] = []
    came: list[tuple[int, int]] = []
    for op, a0, a1, b0, b1 in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        if op in ("replace", "delete"):
            _add(gone, ta, a0, a1)
        if op in ("replace", "insert"):
            _add(came, tb, b0, b1)
    return gone, came


def _add(spans: list[tuple[int, int]], toks: Sequence[str], lo: int, hi: int) -> None:
    """Append the run [lo, hi) to `spans`, joined to the last run when only white space parts them."""
    if spans and all(t.isspace() for t in toks[spans[-1][1]:lo]):
        spans[-1] = (spans[-1][0], hi)
    else:
        spans.append((lo, hi))


def line_html(line: str, mark: Sequence[tuple[int, int]] = ()) -> str:
    """One line of a unified diff as HTML: its class from its first character, and the token
    runs `mark` (of the line without that character) marked as changed."""
    kind = {"-": "gd", "+": "gi", "@": "gu"}.get(line[:1])
    if kind == "gu" or not mark:
        body = html.escape(line)
    else:
        body = html.escape(line[0]) + _marked(tokens(line[1:]), mark, "del" if kind == "gd" else "ins")
    return f'<span class="{kind}">{body}</span>' if kind else body


def diff_html_lines(diff: Sequence[str]) -> list[str]:
    """Each line of a unified diff as HTML, with the changed tokens of every replaced line pair
    (a removed line and the added line most like it, in one run of changes) marked."""
    marks: dict[int, list[tuple[int, int]]] = {}
    i = _head(diff)
    while i < len(diff):
        if diff[i].startswith("-"):
            r0 = i
            while i < len(diff) and diff[i].startswith("-"):
                i += 1
            a0 = i
            while i < len(diff) and diff[i].startswith("+"):
                i += 1
            removed, added = [ln[1:] for ln in diff[r0:a0]], [ln[1:] for ln in diff[a0:i]]
            for p, q in pair_lines(removed, added):
                marks[r0 + p], marks[a0 + q] = changed_tokens(removed[p], added[q])
        else:
            i += 1
    return [line_html(ln, marks.get(k, ())) for k, ln in enumerate(diff)]


def _head(diff: Sequence[str]) -> int:
    """How many lines the diff's file header takes (``---`` and ``+++``): 2, or 0 without one."""
    return 2 if len(diff) >= 2 and diff[0].startswith("---") and diff[1].startswith("+++") else 0


def split_visible(diff: Sequence[str], visible: int = VISIBLE) -> int:
    """How many of the diff's lines to show: every line when they fit in `visible`; otherwise
    whole hunks while they fit, or, when those would fill less than half of `visible`,
    `visible` lines (the fold then starts inside a hunk)."""
    if len(diff) <= visible:
        return len(diff)
    cut = 0
    for k, ln in enumerate(diff):
        if ln.startswith("@@") and k > _head(diff):
            if k > visible:
                break
            cut = k
    return cut if cut >= visible // 2 else visible   # a short first hunk: fill up to `visible`


@dataclass
class Diff:
    """A unified diff of two listings, split into the lines shown and the lines folded."""

    old_name: str
    new_name: str
    lines: list[str]                 # the unified diff
    removed: int = 0                 # lines removed, and added, over the whole diff
    added: int = 0
    shown: int = 0                   # how many of `lines` show before the fold
    html_lines: list[str] = field(default_factory=list)
    whole: str = "is in the folded cell above"   # where the reader finds the whole new listing

    @classmethod
    def of(cls, a: Sequence[str], b: Sequence[str], na: str, nb: str, context: int = CONTEXT,
           visible: int = VISIBLE) -> "Diff":
        lines = unified(a, b, na, nb, context)
        body = lines[2:]
        return cls(na, nb, lines, sum(ln.startswith("-") for ln in body), sum(ln.startswith("+") for ln in body),
                   split_visible(lines, visible), diff_html_lines(lines))

    @property
    def folded(self) -> list[str]:
        return self.lines[self.shown:]

    def fold_summary(self) -> str:
        """What the fold holds: its changed lines and hunks."""
        rest = self.folded
        changes = sum(ln[:1] in "+-" for ln in rest)   # the header never folds
        hunks = sum(ln.startswith("@@") for ln in rest)
        lines = f"{changes} more changed line{'s' * (changes != 1)}"
        if rest and not rest[0].startswith("@@"):   # the cut fell inside a hunk
            more = f", in {hunks} more hunk{'s' * (hunks != 1)}" if hunks else ""
            return f"{lines}: the rest of this hunk{more}"
        return f"{lines} in {hunks} more hunk{'s' * (hunks != 1)}"

    def caption_html(self) -> str:
        na, nb = (f'<code class="docutils literal notranslate">{html.escape(n)}</code>'
                  for n in (self.old_name, self.new_name))
        return (f"<p><strong>What changed from {na} to {nb}:</strong> {self.removed} lines out, "
                f"{self.added} in. The whole of {nb} {html.escape(self.whole)}.</p>")

    def caption_text(self) -> str:
        return (f"What changed from {self.old_name} to {self.new_name}: {self.removed} lines out, "
                f"{self.added} in. The whole of {self.new_name} {self.whole}.")

    def _block(self, rows: Sequence[str]) -> str:
        return ('<div class="highlight-diff notranslate"><div class="highlight"><pre>'
                + "\n".join(rows) + "\n</pre></div></div>")

    def _repr_html_(self) -> str:
        parts = ['<div class="gpubook-diff">', self.caption_html(), self._block(self.html_lines[:self.shown])]
        if self.folded:
            parts.append(f'<details class="gpubook-diff-more"><summary>Show the rest of the diff: '
                         f"{self.fold_summary()}</summary>{self._block(self.html_lines[self.shown:])}</details>")
        parts.append("</div>")
        return "\n".join(parts)

    def __repr__(self) -> str:
        return self.caption_text() + "\n\n" + "\n".join(self.lines)
