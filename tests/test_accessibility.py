"""Accessibility of the built book: axe-core (the copy that axe-playwright-python ships) run on
every page and demo in headless Chromium, in the light and the dark theme, reporting serious and
critical violations. Its own file, so that the test run hands it to one worker and the rest of
the browser tests (tests/test_browser.py) to another: the scan takes minutes on two cores.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from browser_support import (  # noqa: F401 - fixtures are used by name
    BROWSER_MARKS, ROOT, THEMES, Session, browser, pages, set_theme, wait_for_transitions,
)

pytestmark = BROWSER_MARKS
DEMOS = sorted(p.stem for p in (ROOT / "_static" / "demos").glob("*.html"))


@functools.cache
def _axe_source() -> str:
    import axe_playwright_python

    return (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text(encoding="utf-8")


# axe's colour-contrast rule costs a computation per element that holds text (most of a scan:
# 25 of the 29 s of a full run on chapter 11B's page went to the code's token spans alone). Two
# elements with the same tag, classes, colour, font, shadow, opacity, clipping and the same
# backdrop (the background colours and images, opacities, blend modes and filters of the element
# and its ancestors up to the first opaque one) have the same contrast. So the rule sees one
# visible element of each such kind per document (marked data-axe-rep), in the page and in each
# frame; every other rule still runs on every node. test_a_planted_low_contrast_is_reported shows
# that a colour made too faint, in prose or in every token of a kind, is still reported.
_MARK_KINDS = """() => {
  const opaque = c => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return false;
    const p = m[1].split(',').map(s => s.trim()); return p.length < 4 || parseFloat(p[3]) >= 1; };
  const backdrop = el => {
    const out = [];
    for (let e = el; e; e = e.parentElement) {
      const cs = getComputedStyle(e);
      out.push([cs.backgroundColor, cs.backgroundImage, cs.opacity, cs.mixBlendMode, cs.filter].join(' '));
      if (cs.backgroundImage === 'none' && opaque(cs.backgroundColor) && cs.opacity === '1') break;
    }
    return out.join('/');
  };
  document.querySelectorAll('[data-axe-rep]').forEach(e => e.removeAttribute('data-axe-rep'));
  const seen = new Set(); let kept = 0;
  for (const el of document.querySelectorAll('body *')) {
    if (![...el.childNodes].some(n => n.nodeType === 3 && n.data.trim())) continue;
    if (!el.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;
    const cs = getComputedStyle(el);
    const key = [el.tagName, el.getAttribute('class'), cs.color, cs.fontWeight, cs.fontSize, cs.fontStyle,
                 cs.textShadow, cs.opacity, cs.position, cs.clip, cs.clipPath, backdrop(el)].join('|');
    if (!seen.has(key)) { seen.add(key); el.setAttribute('data-axe-rep', ''); kept++; }
  }
  return kept;
}"""


# The rules whose verdict depends on colours; the others read only the document, which is the
# same in both themes.
COLOUR_RULES = ("color-contrast", "link-in-text-block")
# The contrast rule narrowed to the marked elements, in the same single run as every other rule.
_NARROW = "() => axe.configure({rules: [{id: 'color-contrast', selector: '[data-axe-rep]'}]})"


def run_axe(page: object, colours_only: bool = False) -> list[dict]:
    """Serious and critical axe-core violations of a page and of the frames inside it (with
    `colours_only`, of the rules in COLOUR_RULES), in one run of axe per call."""
    src = _axe_source()
    for frame in page.frames:  # the page itself, then each frame: one element of each kind
        frame.evaluate(src + "\n;void 0")
        frame.evaluate(_MARK_KINDS)
        frame.evaluate(_NARROW)
    only = f"{{runOnly: {list(COLOUR_RULES)}}}" if colours_only else "{}"
    result = page.evaluate(
        f"async () => await axe.run(document, Object.assign({{resultTypes: ['violations'], iframes: true}}, {only}))"
    )
    return [
        {"id": v["id"], "impact": v["impact"], "help": v["help"],
         "nodes": [n["target"] for n in v["nodes"][:5]]}
        for v in result["violations"] if v["impact"] in ("serious", "critical")
    ]


def _in_theme(page: object, theme: str) -> None:
    """Switch a loaded book page to `theme` with the reader's switcher, and wait until the demos
    framed in it show that theme too, their colour transitions finished."""
    set_theme(page, theme)
    for frame in page.frames[1:]:
        frame.wait_for_function("t => document.documentElement.dataset.theme === t", arg=theme, timeout=5000)
        wait_for_transitions(frame)


def test_no_serious_accessibility_violations(browser: object, served_book: str, pages: list[str]) -> None:
    """Every page, loaded once: every rule in the light theme, then, switched to the dark theme,
    the rules that read colours (the dark theme changes colours only). Every demo on its own
    page in each theme."""
    s = Session(browser, served_book, theme="light")
    problems = {}

    def scan(page: object, name: str, theme: str) -> None:
        # axe re-reads the stylesheets itself and resolves the theme's relative @import
        # against the page, not the sheet: its own 404s are not the book's
        s.record_failures = False
        found = run_axe(page, colours_only=theme != THEMES[0])
        s.record_failures = True
        if found:
            problems[f"{name} ({theme})"] = found

    try:
        for path in pages:
            page = s.open(path, wait="settled")
            for theme in THEMES:
                if theme != THEMES[0]:
                    _in_theme(page, theme)
                assert page.evaluate("() => document.documentElement.dataset.theme") == theme
                scan(page, path, theme)
            page.close()
        for path in [f"_static/demos/{d}.html" for d in DEMOS]:
            for theme in THEMES:
                page = s.open(f"{path}?theme={theme}", wait="settled")
                scan(page, path, theme)
                page.close()
        assert not problems, json.dumps(problems, indent=1)
        s.assert_clean()
    finally:
        s.close()


def test_a_planted_low_contrast_is_reported(browser: object, served_book: str, pages: list[str]) -> None:
    """The scan still reports a colour made too faint: a paragraph of its own kind, and every
    token of one kind in the code (all of them share one representative)."""
    chapter = next(p for p in pages if p.startswith("chapters/"))
    s = Session(browser, served_book, theme="light")
    try:
        page = s.open(chapter)
        s.record_failures = False
        assert run_axe(page) == [], "the page has violations of its own"
        page.evaluate("""() => {
            const p = document.createElement('p'); p.id = 'planted-faint'; p.textContent = 'a faint planted line';
            p.style.color = '#d0d0d0'; document.querySelector('article').prepend(p);
            const s = document.createElement('style');
            s.textContent = 'div.highlight pre span.n { color: #e4e4e4 !important; }';
            document.head.append(s);
            [...document.querySelectorAll('div.highlight pre span.n')].find(e => e.checkVisibility()).id = 'planted-token'; }""")
        found = [v for v in run_axe(page) if v["id"] == "color-contrast"]
        targets = [t for v in found for t in v["nodes"]]
        assert any("#planted-faint" in str(t) for t in targets), found
        assert any("#planted-token" in str(t) for t in targets), f"the faint code tokens were not reported: {found}"
        page.close()
    finally:
        s.close()
