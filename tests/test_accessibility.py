"""Accessibility of the built book: axe-core (the copy that axe-playwright-python ships) run on
every page and demo in headless Chromium, in the light and the dark theme, reporting serious and
critical violations. Its own file, so that the test run hands it to one worker and the rest of
the browser tests (tests/test_browser.py) to another: each scan takes minutes on two cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from browser_support import (  # noqa: F401 - fixtures are used by name
    BROWSER_MARKS, ROOT, THEMES, Session, browser, pages,
)

pytestmark = BROWSER_MARKS
DEMOS = sorted(p.stem for p in (ROOT / "_static" / "demos").glob("*.html"))


def _axe_source() -> str:
    import axe_playwright_python

    return (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text(encoding="utf-8")


# Syntax-highlighted code is most of a chapter's text nodes, and axe's colour-contrast rule
# costs a computation per node (25 of the 29 s of a full run on chapter 11B's page). Two token
# spans with the same classes, colour, weight, size and code-block background have the same
# contrast, so every rule still runs on every node except that the contrast rule sees one span of
# each such kind per page (marked data-axe-token); the other code spans are left out of that
# rule only.
_MARK_TOKENS = """() => {
  const seen = new Set(); let kept = 0;
  for (const block of document.querySelectorAll('div.highlight')) {
    const bg = getComputedStyle(block).backgroundColor + '/' + getComputedStyle(block.querySelector('pre') || block).backgroundColor;
    for (const span of block.querySelectorAll('pre span')) {
      const cs = getComputedStyle(span);
      const key = [span.className, cs.color, cs.backgroundColor, cs.fontWeight, cs.fontSize, cs.opacity, bg].join('|');
      if (!seen.has(key)) { seen.add(key); span.setAttribute('data-axe-token', ''); kept++; }
    }
  }
  return kept;
}"""


# The rules whose verdict depends on colours; the others read only the document, which is the
# same in both themes.
COLOUR_RULES = ("color-contrast", "link-in-text-block")


def run_axe(page: object, colours_only: bool = False) -> list[dict]:
    """Serious and critical axe-core violations of a page and of the frames inside it (with
    `colours_only`, of the rules in COLOUR_RULES)."""
    src = _axe_source()
    for frame in page.frames:
        frame.evaluate(src + "\n;void 0")
    tokens = page.evaluate(_MARK_TOKENS)
    others = "{runOnly: ['link-in-text-block']}" if colours_only else "{rules: {'color-contrast': {enabled: false}}}"
    everything = page.evaluate(
        "async () => await axe.run(document, Object.assign({resultTypes: ['violations'], iframes: true},"
        f" {others}))"
    )
    runs = [page.evaluate(
        "async () => await axe.run({exclude: [['div.highlight']]},"
        " {resultTypes: ['violations'], iframes: true, runOnly: ['color-contrast']})"
    )]
    if tokens:
        runs.append(page.evaluate(
            "async () => await axe.run({include: [['[data-axe-token]']]},"
            " {resultTypes: ['violations'], runOnly: ['color-contrast']})"
        ))
    result = {"violations": everything["violations"] + [v for r in runs for v in r["violations"]]}
    return [
        {"id": v["id"], "impact": v["impact"], "help": v["help"],
         "nodes": [n["target"] for n in v["nodes"][:5]]}
        for v in result["violations"] if v["impact"] in ("serious", "critical")
    ]


@pytest.mark.parametrize("theme", THEMES)
def test_no_serious_accessibility_violations(browser: object, served_book: str, pages: list[str], theme: str) -> None:
    s = Session(browser, served_book, theme=theme)
    try:
        problems = {}
        for path in pages + [f"_static/demos/{d}.html" for d in DEMOS]:
            page = s.open(path if "demos" not in path else f"{path}?theme={theme}")
            if "demos" not in path:
                assert page.evaluate("() => document.documentElement.dataset.theme") == theme
            # axe re-reads the stylesheets itself and resolves the theme's relative @import
            # against the page, not the sheet: its own 404s are not the book's
            s.record_failures = False
            # The dark theme changes colours only: its run checks the rules that read them.
            found = run_axe(page, colours_only=theme == "dark")
            s.record_failures = True
            if found:
                problems[path] = found
            page.close()
        assert not problems, json.dumps(problems, indent=1)
        s.assert_clean()
    finally:
        s.close()
