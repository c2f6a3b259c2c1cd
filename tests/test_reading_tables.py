"""The book's tables as a reader sees them: on a laptop every table fits the text column, and on a
phone every number of every table can be read beside the name of its row.

Both tests read every chapter with its dropdowns opened (a table in a dropdown is read once the
reader opens it), in a checked session: nothing off localhost, no failed request, no JavaScript
error.
"""

from __future__ import annotations

import pytest

from browser_support import (  # noqa: F401 - fixtures are used by name
    BROWSER_MARKS, PHONE, SharedPages, browser, chapters, checked_session, pages, restored, shared_pages,
    sideways_overflow,
)

pytestmark = BROWSER_MARKS

_OPEN_DROPDOWNS = "() => document.querySelectorAll('article details').forEach(d => { d.open = true; })"

# Every table shown (dropdowns open): its width, the width of the box that holds it — the
# theme's scrolling container around a table of the page, or the element around a table that a
# cell's output holds; a table wider than that box scrolls inside it — and how many of its cells
# set their digits in proportional figures rather than tabular ones.
_WIDTHS_JS = """() => [...document.querySelectorAll('article table')].filter(t => t.offsetParent !== null)
  .map((t, i) => {
    const box = t.closest('.pst-scrollable-table-container') || t.parentElement;
    const head = t.rows[0] ? [...t.rows[0].cells].map(c => c.innerText.trim()).join(' | ') : '';
    const ragged = [...t.querySelectorAll('td')].filter(c => !getComputedStyle(c).fontVariantNumeric.includes('tabular-nums')).length;
    return {i, width: t.getBoundingClientRect().width, room: box.clientWidth, head: head.slice(0, 90), ragged};
  })"""

# At a phone's width, for every body cell of a shown table that holds a number: the cell is
# scrolled into view (the nearest scrolling box moves it, as a reader's swipe would), then both
# it and its row's first cell must lie inside the part of the screen where the table shows —
# the viewport, narrowed to the table's scrolling box if it has one — without covering each
# other, while the page itself has not moved sideways.
_NUMBERS_JS = """() => {
  const hidden = [];
  let numbers = 0;
  // a number: a digit that begins a token (not the '64' of 'b64', the '100' of 'sm_100a' or the
  // '3' of 'fa3_h1', which are parts of names)
  const NUMBER = /(^|[^\\p{L}\\p{N}_.])\\p{N}/u;
  const inside = (r, lo, hi) => r.left >= lo - 1 && r.right <= hi + 1;
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1
                          && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  const tables = [...document.querySelectorAll('article table')].filter(t => t.offsetParent !== null);
  tables.forEach((t, ti) => {
    for (const row of t.tBodies.length ? [...t.tBodies].flatMap(b => [...b.rows]) : [...t.rows].slice(1)) {
      const label = row.cells[0];
      for (const cell of row.cells) {
        if (!NUMBER.test(cell.innerText) || cell.offsetParent === null) continue;
        numbers++;
        const boxes = [];
        for (let p = t.parentElement; p && p !== document.body; p = p.parentElement) {
          if (p.scrollWidth > p.clientWidth + 1 && /auto|scroll|hidden/.test(getComputedStyle(p).overflowX)) boxes.push(p);
        }
        boxes.forEach(b => { b.scrollLeft = 0; });   // a swipe starts from the table as the page shows it
        cell.scrollIntoView({block: 'nearest', inline: 'nearest'});
        let lo = 0, hi = document.documentElement.clientWidth;
        for (const p of boxes) {
          const r = p.getBoundingClientRect();
          lo = Math.max(lo, r.left + p.clientLeft); hi = Math.min(hi, r.left + p.clientLeft + p.clientWidth);
        }
        const c = cell.getBoundingClientRect(), l = label.getBoundingClientRect();
        let why = '';
        if (window.scrollX !== 0) why = `the page scrolled ${window.scrollX} px sideways to show it`;
        else if (!inside(c, lo, hi)) why = `it lies at ${Math.round(c.left)}-${Math.round(c.right)} px, the table shows ${Math.round(lo)}-${Math.round(hi)} px`;
        else if (cell !== label && !inside(l, lo, hi)) why = `its row's first cell is out of view (${Math.round(l.left)}-${Math.round(l.right)} px)`;
        else if (cell !== label && overlap(c, l)) why = "its row's first cell covers it";
        if (why) hidden.push(`table ${ti} ('${label.innerText.trim().slice(0, 30)}'): '${cell.innerText.trim().slice(0, 30)}': ${why}`);
        window.scrollTo(0, window.scrollY);
      }
    }
  });
  return {numbers, hidden};
}"""


def test_at_laptop_width_every_table_fits_its_column(shared_pages: SharedPages, chapters: list[str]) -> None:
    """At 1280 px no table of any chapter is wider than the column that holds it: a results
    table that scrolls sideways hides its right-hand columns — usually the numbers — behind a
    scroll bar that a reader on a laptop does not expect. And every cell sets its digits in
    tabular figures, so that the numbers of a column line up."""
    too_wide: list[str] = []
    ragged: list[str] = []
    tables = 0
    for path in chapters:
        page = shared_pages.page(path)
        with restored(page):
            page.evaluate(_OPEN_DROPDOWNS)
            for t in page.evaluate(_WIDTHS_JS):
                tables += 1
                if t["width"] > t["room"] + 1:
                    too_wide.append(f"{path}, table {t['i']}: {t['width']:.0f} px in a column of {t['room']} px "
                                    f"({t['head']})")
                if t["ragged"]:
                    ragged.append(f"{path}, table {t['i']}: {t['ragged']} cells")
    assert tables > 50, f"only {tables} tables measured"
    assert not too_wide, f"{len(too_wide)} tables wider than their column at 1280 px:\n" + "\n".join(too_wide)
    assert not ragged, "table cells whose digits are not tabular (a column of numbers does not line up):\n" + \
        "\n".join(ragged)
    shared_pages.assert_clean()


def test_on_a_phone_every_number_shows_beside_its_row(browser: object, served_book: str, chapters: list[str]) -> None:
    """At 390 px every table cell that holds a number can be read together with the first cell of
    its row, which names what the number is of.

    Precisely: for each body cell that holds a number (a digit that begins a token: '4096³',
    '1.02', '(620–633)', but not the digits inside a name such as 'b64' or 'sm_100a'), the
    table's scrolling box is put back at its start and the cell scrolled into view from there
    (``scrollIntoView``, nearest edge: the box moves just far enough, as a reader's swipe moves
    it). Then the cell lies inside the part of the screen where its table shows (the
    viewport, narrowed to each scrolling box around the table), the row's first cell lies there
    too, the two do not cover each other, and the page itself has not scrolled sideways.

    Why this and not merely "reachable": a number that a swipe brings into view while the name of
    its row slides out is a number without a meaning — a ladder of TFLOP/s figures whose step
    names scrolled off to the left reads as a column of anonymous figures. The check therefore
    passes a table that fits the screen, a table whose first column stays put (sticky) while its
    number columns scroll, and a table laid out as one card per row; it fails a plain wide table
    whose numbers sit further right than the screen is wide less its first column.
    """
    hidden: list[str] = []
    numbers = 0
    with checked_session(browser, served_book, **PHONE) as s:
        for path in chapters:
            page = s.open(path, wait="load")
            page.evaluate(_OPEN_DROPDOWNS)
            assert sideways_overflow(page) <= 1, f"{path}: the page scrolls sideways on a phone"
            got = page.evaluate(_NUMBERS_JS)
            numbers += got["numbers"]
            hidden += [f"{path}: {h}" for h in got["hidden"]]
            page.close()
    assert numbers > 500, f"only {numbers} table cells with a number measured"
    by_page: dict[str, int] = {}
    for h in hidden:
        by_page[h.split(":")[0]] = by_page.get(h.split(":")[0], 0) + 1
    assert not hidden, (f"{len(hidden)} numbers out of view beside their row on a phone "
                        f"({', '.join(f'{p}: {n}' for p, n in by_page.items())}):\n" + "\n".join(hidden[:60]))
