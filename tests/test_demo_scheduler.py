"""The scheduler demo (chapter 7) in a real browser: its model is gpubook.schedule's, its
controls change what it shows, and it works at phone width, in both themes, offline.

The demo is opened from browser_support's ``demo_site`` (no book build needed); the book-wide
browser tests check its embedding in the chapter.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from browser_support import BROWSER_MARKS, browser, open_demo, serious_axe_violations, sideways_overflow  # noqa: F401
from gpubook import schedule

pytestmark = BROWSER_MARKS


@pytest.fixture()
def open_scheduler(browser: object, demo_site: str) -> Iterator[object]:
    """Opens the demo, each time in a fresh checked session: any JavaScript error, failed
    request or request off localhost fails the test."""
    sessions = []

    def _open(theme: str | None = None, width: int = 1100, height: int = 900, touch: bool = False) -> object:
        s, page = open_demo(browser, demo_site, "scheduler", theme=theme, width=width, height=height,
                            touch=touch)
        sessions.append(s)
        return page

    yield _open
    try:
        for s in sessions:
            s.assert_clean()
    finally:
        for s in sessions:
            s.close()


def js_schedule(page: object, policy: str, pattern: str, ntiles: int, nsms: int, nbusy: int,
                lpt: bool) -> dict:
    return page.evaluate("(a) => scenario(...a)", [policy, pattern, ntiles, nsms, nbusy, lpt])


def py_slots(sc: dict, policy: str, nsms: int) -> list[tuple]:
    slots = schedule.simulate(policy, sc["costs"], nsms, sc["available"], sc["order"])
    return sorted((s.tile, s.worker, s.start, s.end) for s in slots)


def test_demo_model_is_the_python_model(open_scheduler: object) -> None:
    """Every slot of every schedule the demo computes equals gpubook.schedule's, tails included."""
    page = open_scheduler()
    busy = page.evaluate("() => BUSY_UNTIL")
    n_checked = 0
    for policy, pattern, ntiles, nsms, nbusy, lpt in itertools.product(
            schedule.POLICIES, ("equal", "growing", "causal", "random"), (4, 7, 18, 40), (2, 3, 8),
            (0, 1), (False, True)):
        sc = js_schedule(page, policy, pattern, ntiles, nsms, nbusy, lpt)
        assert sc["available"] == [busy if w < nbusy else 0 for w in range(nsms)]
        js = sorted((s["tile"], s["worker"], s["start"], s["end"]) for s in sc["slots"])
        assert js == py_slots(sc, policy, nsms), (policy, pattern, ntiles, nsms, nbusy, lpt)
        py = schedule.simulate(policy, sc["costs"], nsms, sc["available"], sc["order"])
        assert sc["makespan"] == schedule.makespan(py) and sc["tail"] == schedule.tail(py)
        assert abs(sc["busy"] - schedule.utilization(py, nsms)) < 1e-12
        schedule.check_exactly_once(py, ntiles)
        if lpt:
            assert sc["order"] == sorted(range(ntiles), key=lambda t: (-sc["costs"][t], t))
        n_checked += 1
    assert n_checked == 3 * 4 * 4 * 3 * 2 * 2
    # the deterministic patterns are what the page says they are
    for n in (4, 18, 40):
        assert page.evaluate("n => costsFor('equal', n)", n) == [3] * n
        assert page.evaluate("n => costsFor('growing', n)", n) == [1 + 8 * t // n for t in range(n)]
        assert page.evaluate("n => costsFor('causal', n)", n) == [1 + t % 6 for t in range(n)]
        rnd = page.evaluate("n => costsFor('random', n)", n)
        assert all(1 <= c <= 8 for c in rnd) and rnd == page.evaluate("n => costsFor('random', n)", n)


def test_demo_shows_the_makespan_of_the_python_model(open_scheduler: object) -> None:
    """Drive the controls; the stats the page shows match the Python model of that setting."""
    page = open_scheduler()
    seen = set()
    for policy, lpt, nbusy in (("static", False, 0), ("dynamic", False, 0), ("dynamic", True, 0),
                               ("clc", False, 0), ("static", False, 2), ("dynamic", False, 2), ("clc", False, 2)):
        page.check(f"input[name=policy][value='{policy}']")
        page.select_option("#pattern", "causal")
        page.fill("#ntiles", "24")
        page.fill("#nsms", "5")
        page.fill("#nbusy", str(nbusy))
        if policy != "static":
            page.set_checked("#lpt", lpt)
        costs = [1 + t % 6 for t in range(24)]
        avail = [page.evaluate("() => BUSY_UNTIL") if w < nbusy else 0 for w in range(5)]
        order = sorted(range(24), key=lambda t: (-costs[t], t)) if lpt else None
        py = schedule.simulate(policy, costs, 5, avail, order)
        stats = page.locator("#stats")
        assert stats.get_attribute("data-policy") == policy
        assert float(stats.get_attribute("data-makespan")) == schedule.makespan(py)
        assert float(stats.get_attribute("data-tail")) == schedule.tail(py)
        assert f"ends at {schedule.makespan(py):g}" in stats.inner_text()
        # the whole schedule is drawn: one bar per tile, each on the SM the model put it on
        bars = page.locator("#timeline rect.tile")
        assert bars.count() == 24
        placed = sorted((int(b.get_attribute("data-tile")), int(b.get_attribute("data-sm")))
                        for b in bars.all())
        assert placed == sorted((s.tile, s.worker) for s in py)
        seen.add((policy, lpt, nbusy, schedule.makespan(py), tuple(placed)))
    placed = {(s[0], s[1], s[2]): s[4] for s in seen}
    spans = {(s[0], s[1], s[2]): s[3] for s in seen}
    # changing the scheduler changes the drawing ...
    assert placed[("static", False, 0)] != placed[("dynamic", False, 0)]
    assert placed[("dynamic", True, 0)] != placed[("dynamic", False, 0)]
    assert placed[("clc", False, 2)] != placed[("dynamic", False, 2)]
    # ... except that cluster launch control hands out tiles like a counter when all SMs start together
    assert placed[("clc", False, 0)] == placed[("dynamic", False, 0)]
    # largest first shortens the dynamic schedule; late SMs hurt the static schedule most
    assert spans[("dynamic", True, 0)] < spans[("dynamic", False, 0)]
    assert spans[("static", False, 2)] > spans[("dynamic", False, 2)] >= spans[("clc", False, 2)]


def test_demo_steps_and_plays(open_scheduler: object) -> None:
    page = open_scheduler()
    page.check("input[name=policy][value='dynamic']")
    stats = page.locator("#stats")
    span = float(stats.get_attribute("data-makespan"))
    assert float(stats.get_attribute("data-time")) == span       # opens on the whole schedule
    page.click("#reset")
    assert float(stats.get_attribute("data-time")) == 0
    assert page.locator("#timeline rect.tile").count() == 0
    assert page.locator("#queue .qbox").count() == 18            # every tile still waits
    page.click("#step")
    t1 = float(stats.get_attribute("data-time"))
    assert 0 < t1 <= span
    running = page.locator("#timeline rect.tile").count()
    assert running == 4                                           # one tile on each of the 4 SMs
    assert page.locator("#queue .qbox").count() == 18 - 4
    page.click("#step")
    assert float(stats.get_attribute("data-time")) > t1
    page.click("#reset")
    page.click("#play")
    assert page.inner_text("#play") == "Pause"
    page.wait_for_function("() => +document.getElementById('stats').dataset.time > 0", timeout=5000)
    page.wait_for_function(f"() => +document.getElementById('stats').dataset.time === {span}", timeout=15000)
    assert page.inner_text("#play") == "Play"
    assert page.locator("#timeline rect.tile.done").count() == 18
    # the time slider scrubs
    page.fill("#time", str(span / 2))
    assert float(stats.get_attribute("data-time")) == span / 2
    # static schedules name each waiting tile's SM; dynamic ones do not
    page.click("#reset")
    assert "→ SM" not in page.inner_text("#queue")
    page.check("input[name=policy][value='static']")
    page.click("#reset")
    assert "→ SM 1" in page.inner_text("#queue")
    assert page.is_disabled("#lpt")


def test_demo_keyboard_and_touch(open_scheduler: object) -> None:
    page = open_scheduler(width=390, height=844, touch=True)
    over = sideways_overflow(page)
    assert over <= 0, f"scrolls sideways by {over}px at 390 px"
    before = page.get_attribute("#stats", "data-makespan")
    page.tap("input[name=policy][value='static']")
    page.tap("#nbusy")  # a tap on the slider moves it
    page.fill("#nbusy", "2")
    assert page.get_attribute("#stats", "data-makespan") != before
    page.tap("#reset")
    assert page.get_attribute("#stats", "data-time") == "0"
    # keyboard: arrows move the SM slider and redraw the rows
    page.focus("#nsms")
    page.keyboard.press("ArrowRight")
    assert page.input_value("#nsms") == "5"
    assert page.locator("#timeline text", has_text="SM 4").count() == 1


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_demo_theme_and_accessibility(open_scheduler: object, theme: str) -> None:
    page = open_scheduler(theme=theme)
    assert page.evaluate("() => document.documentElement.dataset.theme") == theme
    bg = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    lum = sum(int(v) for v in bg[bg.index("(") + 1 : bg.index(")")].split(",")[:3]) / 3
    assert (lum < 60) == (theme == "dark"), bg
    serious = serious_axe_violations(page)
    assert not serious, serious


@pytest.mark.parametrize("width", [1100, 390])
def test_demo_keeps_its_height_while_the_reader_interacts(open_scheduler: object, width: int) -> None:
    """The embedding frame follows the demo's height: it must not jump when settings change."""
    page = open_scheduler(width=width)
    height = "() => Math.ceil(document.documentElement.getBoundingClientRect().height)"
    seen = [page.evaluate(height)]
    for action in (lambda: page.fill("#nsms", "2"), lambda: page.fill("#nsms", "8"),
                   lambda: page.fill("#ntiles", "40"), lambda: page.click("#reset"),
                   lambda: page.check("input[name=policy][value='clc']"), lambda: page.click("#step"),
                   lambda: page.fill("#ntiles", "4"), lambda: page.click("#end")):
        action()
        seen.append(page.evaluate(height))
    assert max(seen) - min(seen) <= 2, f"the demo's height changes while interacting: {seen}"
