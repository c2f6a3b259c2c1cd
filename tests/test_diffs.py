"""The ladder's diffs as a reader takes them in (gpubook.book.diffs): the changed tokens marked
inside a changed line, at most VISIBLE lines shown and the rest folded with nothing lost, every
text escaped, and the caption's counts right; checked on the chapters' own steps too."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from gpubook.book import diffs, ladder
from gpubook.book.diffs import VISIBLE, Diff

ROOT = Path(__file__).resolve().parents[1]
MARKED = re.compile(r'<(del|ins) class="gpubook-diff-x">(.*?)</\1>')


def text_of(fragment: str) -> str:
    """What a reader sees of an HTML fragment: its text, unescaped."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def marks(fragment: str) -> list[tuple[str, str]]:
    """(del|ins, text) of every changed-token mark in a fragment."""
    return [(tag, html.unescape(body)) for tag, body in MARKED.findall(fragment)]


def blocks(page: str) -> list[str]:
    """The text of each <pre> of a rendered diff, as lines: the shown part, then the folded one."""
    return [text_of(p).split("\n")[:-1] for p in re.findall(r"<pre>(.*?)</pre>", page, flags=re.S)]


STEP_A = '''def step_a(M, N):
    x = T.alloc(M, N)
    tmem = T.TMEMPool(pool, total_cols=512, cta_group=1, tmem_addr=addr)
    return x'''
STEP_B = STEP_A.replace("step_a", "step_b").replace("cta_group=1", "cta_group=2")


def test_one_changed_token_is_marked_as_exactly_that_token():
    d = ladder.show_diff(STEP_A, STEP_B)
    page = d._repr_html_()
    rows = {text_of(r): r for r in d.html_lines}
    removed = rows["-    tmem = T.TMEMPool(pool, total_cols=512, cta_group=1, tmem_addr=addr)"]
    added = rows["+    tmem = T.TMEMPool(pool, total_cols=512, cta_group=2, tmem_addr=addr)"]
    assert marks(removed) == [("del", "1")] and marks(added) == [("ins", "2")]
    assert 'class="gd"' in removed and 'class="gi"' in added
    assert marks(rows["-def step_a(M, N):"]) == [("del", "step_a")]
    assert marks(rows["+def step_b(M, N):"]) == [("ins", "step_b")]
    # the unchanged lines carry no mark, and the diff marks nothing else
    assert len(marks(page)) == 4
    assert not marks(rows["     x = T.alloc(M, N)"])


def test_tokens_are_names_numbers_and_single_marks():
    assert diffs.tokens("cta_group=1, x.y(2)") == ["cta_group", "=", "1", ",", " ", "x", ".", "y", "(", "2", ")"]
    # an insertion inside a line marks only what came, and runs parted by a space are one mark
    gone, came = diffs.changed_tokens("init_empty=128)", "init_empty=2 * 128)")
    toks = diffs.tokens("init_empty=2 * 128)")
    assert gone == [] and ["".join(toks[a:b]) for a, b in came] == ["2 * "]


def test_lines_pair_with_the_line_most_like_them_or_not_at_all():
    removed = ["a = f(1)", "completely different"]
    added = ["nothing alike here at all", "a = f(2)"]
    assert diffs.pair_lines(removed, added) == [(0, 1)]
    assert diffs.pair_lines(["x = 1"], ["def y(): pass  # other"]) == []


def test_everything_is_escaped():
    a = 'def a():\n    s = "<script>alert(1)</script> & x"\n    return s'
    b = 'def b():\n    s = "<b>bold</b> & y"\n    return s'
    page = ladder.diff_html(a, b)
    assert set(re.findall(r"</?(\w+)", page)) <= {"div", "p", "strong", "code", "pre", "span", "del", "ins"}
    assert "&lt;" in page and "&amp;" in page and "&quot;" in page
    assert text_of(page).count('+    s = "<b>bold</b> & y"') == 1
    assert text_of(page).count('-    s = "<script>alert(1)</script> & x"') == 1
    named = ladder.diff_html("def a_lt():\n    return 1", "def b_amp():\n    return 2")
    assert "<code class=\"docutils literal notranslate\">b_amp</code>" in named


def _long(n_hunks: int, gap: int = 12) -> tuple[str, str]:
    """Two functions with one changed line every `gap` lines."""
    a = ["def long_a():"] + [f"    v{i} = {i}" for i in range(n_hunks * gap)]
    b = ["def long_b():"] + [f"    v{i} = {i + 1 if i % gap == 0 else i}" for i in range(n_hunks * gap)]
    return "\n".join(a), "\n".join(b)


def test_a_long_diff_shows_at_most_forty_lines_and_folds_the_rest_without_losing_any():
    a, b = _long(12)
    d = ladder.show_diff(a, b)
    page = d._repr_html_()
    shown, folded = blocks(page)
    assert len(d.lines) > 2 * VISIBLE
    assert len(shown) <= VISIBLE and shown[0] == "--- long_a" and shown[1] == "+++ long_b"
    assert shown + folded == d.lines == ladder.source_diff(a, b).splitlines()
    assert page.count("<details") == 1 and folded[0].startswith("@@")   # folded at a hunk's start
    changed = sum(ln[:1] in "+-" for ln in folded)
    hunks = sum(ln.startswith("@@") for ln in folded)
    summary = re.search(r"<summary>(.*?)</summary>", page).group(1)
    assert f"{changed} more changed lines in {hunks} more hunks" in summary
    assert hunks == 12 - sum(ln.startswith("@@") for ln in shown)


def test_a_first_hunk_longer_than_forty_lines_folds_inside_itself():
    a = "def big_a():\n" + "\n".join(f"    w{i} = {i}" for i in range(60))
    b = "def big_b():\n" + "\n".join(f"    w{i} = {i * 2}" for i in range(60))
    d = ladder.show_diff(a, b)
    shown, folded = blocks(d._repr_html_())
    assert len(shown) == VISIBLE and shown + folded == d.lines
    assert "the rest of this hunk" in d.fold_summary()


def test_a_short_diff_shows_whole_with_no_fold():
    page = ladder.diff_html(STEP_A, STEP_B)
    assert "<details" not in page and blocks(page) == [ladder.source_diff(STEP_A, STEP_B).splitlines()]


def test_the_caption_counts_the_lines_out_and_in():
    a = "def c_a():\n    x = 1\n    y = 2\n    z = 3\n    return x"
    b = "def c_b():\n    x = 1\n    z = 4\n    q = 5\n    r = 6\n    return x"
    d = ladder.show_diff(a, b)
    body = d.lines[2:]
    assert (d.removed, d.added) == (3, 4) == (sum(ln.startswith("-") for ln in body), sum(ln.startswith("+") for ln in body))
    assert ladder.diff_counts(a, b) == (3, 4)
    caption = text_of(d.caption_html())
    assert caption == "What changed from c_a to c_b: 3 lines out, 4 in. The whole of c_b is in the folded cell above."
    assert repr(d).startswith(caption) and repr(d).endswith("\n".join(d.lines))   # a plain notebook's text
    edited = ladder.show_diff(a, b, whole="is c_a with two edits")   # a listing made by edits of another
    assert text_of(edited.caption_html()).endswith("The whole of c_b is c_a with two edits.")


def test_three_lines_of_context():
    a = "def k_a():\n" + "\n".join(f"    u{i} = {i}" for i in range(20))
    b = a.replace("k_a", "k_b").replace("u10 = 10", "u10 = 11")
    lines = ladder.source_diff(a, b).splitlines()
    last = max(k for k, ln in enumerate(lines) if ln.startswith("@@"))
    assert [ln[:1] for ln in lines[last + 1:]] == [" ", " ", " ", "-", "+", " ", " ", " "]


def _ladder_steps() -> list[tuple[str, str]]:
    """(old source, new source) of every step diff the chapters show with the ladder's show_diff."""
    steps = []
    arg = r'(?:(?:gg\.)?chapter_source\("([^"]+)", "(\w+)"\)|(\w+))'
    for md in sorted((ROOT / "chapters").glob("*.md")):
        for m in re.finditer(rf"^(?:gg\.)?show_diff\({arg}, {arg}\)\s*$", md.read_text(), flags=re.M):
            (c1, n1, l1, c2, n2, l2) = m.groups()
            steps.append((ladder.chapter_source(c1 or md.stem, n1 or l1), ladder.chapter_source(c2 or md.stem, n2 or l2)))
    return steps


def test_every_ladder_diff_of_the_book_fits_forty_visible_lines_with_its_changes_marked():
    steps = _ladder_steps()
    assert len(steps) >= 20, f"only {len(steps)} ladder diffs found in the chapters"
    for old, new in steps:
        d = ladder.show_diff(old, new)
        page = d._repr_html_()
        parts = blocks(page)
        assert len(parts[0]) <= VISIBLE, (d.old_name, d.new_name, len(parts[0]))
        assert sum(parts, []) == d.lines, (d.old_name, d.new_name)
        assert any(tag == "ins" for tag, _ in marks(page)) and any(tag == "del" for tag, _ in marks(page))
        # the def line is renamed: its first mark is the old name
        assert marks(d.html_lines[3])[0] == ("del", d.old_name), d.html_lines[3]


def test_chapter_nine_step_seven_marks_its_changed_tokens():
    old = ladder.chapter_source("09-gemm-pipelines", "make_gemm_v6")
    new = ladder.chapter_source("09-gemm-pipelines", "make_gemm_v7")
    d = ladder.show_diff(old, new)
    assert len(blocks(d._repr_html_())[0]) <= VISIBLE < len(d.lines)
    pairs = [(text_of(h), marks(h)) for h in d.html_lines if marks(h)]
    assert [ms for t, ms in pairs if t.startswith("+def make_gemm_v7(")] == [[("ins", "make_gemm_v7")]]
    # every marked span is whole tokens of its line
    for t, ms in pairs:
        for _, body in ms:
            assert body.strip() == "" or all(tok in diffs.tokens(t[1:]) for tok in diffs.tokens(body))


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_context_is_what_the_caller_asks(n: int):
    a, b = _long(3)   # the def line and v0 change together, then v12 and v24 alone
    d = ladder.show_diff(a, b, context=n)
    assert len(d.lines) == 2 + 3 + (4 + n) + 2 * (2 + 2 * n)
