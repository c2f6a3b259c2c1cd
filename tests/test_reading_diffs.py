"""Reading the ladder's diffs and the book's code in a real browser (headless Chromium, as in
tests/test_browser.py): every diff shows at most 40 lines before its fold and marks the tokens
that changed inside a changed line; a code line that wraps, at a phone's 390 px and a laptop's
1280 px, continues no further left than its own first character and never splits a name."""

from __future__ import annotations

import pytest

from browser_support import (  # noqa: F401 - fixtures are used by name
    BROWSER_MARKS, PHONE, SharedPages, browser, chapters, checked_session, pages, restored, shared_pages,
)

pytestmark = BROWSER_MARKS
VISIBLE = 40

# Each diff block of a page as the reader first sees it: the lines it shows (a folded part, in a
# closed <details>, is not shown), and whether the diff (with its fold) replaces a line by another
# (a run of removed lines right before a run of added ones) and marks a changed token.
_DIFFS_JS = """() => {
  const lines = pre => pre.textContent.replace(/\\n$/, '').split('\\n');
  // shown: laid out and not inside a closed <details> (whose content Chromium lays out hidden)
  const shownPre = pre => pre.offsetParent !== null && !pre.closest('details:not([open])');
  const out = [];
  for (const block of document.querySelectorAll('article .highlight-diff')) {
    const unit = block.closest('.gpubook-diff') || block;
    if (unit !== block && unit.querySelector('.highlight-diff') !== block) continue;  // one entry per diff
    const pres = [...unit.querySelectorAll('.highlight-diff pre')];
    const all = pres.flatMap(lines);
    const replaced = all.some((ln, k) => k > 0 && ln.startsWith('+') && !ln.startsWith('+++')
                                        && all[k - 1].startsWith('-') && !all[k - 1].startsWith('---'));
    const shown = pres.filter(shownPre).flatMap(lines).length;
    out.push({first: all.slice(0, 3).join(' | ').slice(0, 120), shown, total: all.length, replaced,
              marks: unit.querySelectorAll('.gi .gpubook-diff-x, .gd .gpubook-diff-x').length,
              added: unit.querySelectorAll('.gi').length, removed: unit.querySelectorAll('.gd').length});
  }
  return out;
}"""


def test_every_diff_shows_at_most_forty_lines_and_marks_what_changed_inside_a_line(
        shared_pages: SharedPages, chapters: list[str]) -> None:
    seen = replaced = 0
    problems: list[str] = []
    for path in chapters:
        page = shared_pages.page(path)
        for d in page.evaluate(_DIFFS_JS):
            seen += 1
            assert d["added"] and d["removed"], f"{path}: a diff without coloured lines: {d}"
            if d["shown"] > VISIBLE:
                problems.append(f"{path}: {d['shown']} diff lines shown before a fold (of {d['total']}): {d['first']}")
            if d["replaced"]:
                replaced += 1
                if not d["marks"]:
                    problems.append(f"{path}: a diff replaces lines and marks no changed token: {d['first']}")
    assert seen, "no chapter shows a diff"
    assert replaced, "no diff replaces a line: the in-line marks were never checked"
    assert not problems, "\n".join(problems)
    shared_pages.assert_clean()


# Every line of source code shown (a cell's code, the folded listings opened, and the diffs): for
# each line that wraps, where each row after the first starts against the line's first character,
# and the characters on either side of each row break.
_WRAPS_JS = """() => {
  for (const d of document.querySelectorAll('article details')) d.open = true;
  const pres = [...document.querySelectorAll('article div.highlight > pre')].filter(
    p => p.offsetParent !== null && (!p.closest('.cell_output') || p.closest('.highlight-diff')));
  const range = document.createRange();
  let lines = 0, wrapped = 0;
  const left = [], split = [];
  for (const pre of pres) {
    const nodes = [];
    let text = '';
    const walk = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) { nodes.push([n, text.length]); text += n.data; }
    const at = pos => {   // the text node and offset of character `pos`: the last node starting at or before it
      let lo = 0, hi = nodes.length - 1;
      while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (nodes[mid][1] <= pos) lo = mid; else hi = mid - 1; }
      return [nodes[lo][0], Math.min(pos - nodes[lo][1], nodes[lo][0].data.length)];
    };
    const box = pos => {  // the rectangle of character `pos`, or null when it has none
      range.setStart(...at(pos)); range.setEnd(...at(pos + 1));
      const r = [...range.getClientRects()].find(r => r.width > 0);
      return r || null;
    };
    let start = 0;
    for (const line of text.split('\\n')) {
      const end = start + line.length, first = line.search(/\\S/);
      if (first >= 0) {
        lines++;
        const a = box(start + first), b = box(end - 1 - (line.length - line.trimEnd().length));
        if (a && b && b.top > a.top + a.height / 2) {      // the line's last character sits on a lower row
          wrapped++;
          let row = a.top, prev = null;
          for (let i = start + first; i < end; i++) {
            const r = box(i);
            if (!r) continue;
            if (r.top > row + r.height / 2) {               // character i starts a new row
              row = r.top;
              if (r.left < a.left - 0.5)
                left.push(`${(a.left - r.left).toFixed(0)} px left of its first character: ${line.trim().slice(0, 70)}`);
              if (prev !== null && /\\w/.test(text[prev]) && /\\w/.test(text[i]))
                split.push(`'${text.slice(Math.max(start, prev - 12), prev + 1)}|${text.slice(i, i + 12)}' in: ${line.trim().slice(0, 60)}`);
            }
            prev = i;
          }
        }
      }
      start = end + 1;
    }
  }
  return {blocks: pres.length, lines, wrapped, left, split};
}"""


def _wraps(page: object, path: str, width: int) -> tuple[dict, list[str]]:
    got = page.evaluate(_WRAPS_JS)
    problems = [f"{path} at {width} px: a continuation starts {m}" for m in got["left"][:10]]
    problems += [f"{path} at {width} px: a name split across rows {m}" for m in got["split"][:10]]
    return got, problems


@pytest.mark.parametrize("width", [390, 1280])
def test_wrapped_code_lines_keep_their_indentation_and_their_names_whole(
        browser: object, served_book: str, chapters: list[str], width: int) -> None:
    lines = wrapped = 0
    problems: list[str] = []
    kw = PHONE if width == 390 else {"width": 1280, "height": 900}
    with checked_session(browser, served_book, **kw) as s:
        for path in chapters:
            page = s.open(path, wait="load")
            got, p = _wraps(page, path, width)
            lines, wrapped, problems = lines + got["lines"], wrapped + got["wrapped"], problems + p
            page.close()
    assert lines > 1000, f"only {lines} code lines measured"
    if width == 390:
        assert wrapped > 100, f"only {wrapped} of {lines} code lines wrap on a phone: the check saw too little"
    assert not problems, "\n".join(problems[:60])
