"""The online-softmax demo in a real browser: every running max, sum, rescale factor and
accumulator it shows, block by block, equals a Python reference of the same recurrence, with
and without conditional rescaling, and its final output equals the softmax computed at once."""

from __future__ import annotations

import json
import math

import pytest

from browser_support import BROWSER_MARKS, THEMES, browser, opened_demo, sideways_overflow  # noqa: F401

pytestmark = BROWSER_MARKS
PRESETS = ("rising", "peak", "random")


def online(scores: list[float], V: list[list[float]], block: int, conditional: bool, tau: float) -> list[dict]:
    """Flash Attention's recurrence over KV blocks (log2 units), in plain Python."""
    m, l, acc = -math.inf, 0.0, [0.0] * len(V[0])
    out = []
    for j in range(0, len(scores), block):
        s, v = scores[j:j + block], V[j:j + block]
        m_new = max(m, max(s))
        if conditional and m != -math.inf and max(s) - m <= tau:
            m_new = m                                   # keep the stale max: no rescale this block
        alpha = 2.0 ** (m - m_new) if m != -math.inf else 0.0
        p = [2.0 ** (x - m_new) for x in s]
        l = alpha * l + sum(p)
        acc = [alpha * a + sum(pi * vi[k] for pi, vi in zip(p, v)) for k, a in enumerate(acc)]
        out.append({"m": m_new, "alpha": alpha, "l": l, "acc": acc, "rescaled": m != -math.inf and m_new != m,
                    "pmax": max(p)})
        m = m_new
    return out


def softmax_v(scores: list[float], V: list[list[float]]) -> list[float]:
    mx = max(scores)
    p = [2.0 ** (x - mx) for x in scores]
    return [sum(pi * vi[k] for pi, vi in zip(p, V)) / sum(p) for k in range(len(V[0]))]


@pytest.fixture()
def demo(browser: object, demo_site: str):
    with opened_demo(browser, demo_site, "online-softmax") as page:
        yield page


@pytest.mark.parametrize("conditional", [False, True])
def test_every_step_matches_the_python_reference(demo: object, conditional: bool) -> None:
    tau = demo.evaluate("() => TAU")
    assert tau == 8
    block, n_keys = demo.evaluate("() => [BLOCK, KEYS]")
    rescaled_somewhere = skipped_somewhere = False
    for preset in PRESETS:
        demo.select_option("#preset", preset)
        if demo.is_checked("#conditional") != conditional:
            demo.click("#conditional")
        data = demo.evaluate(f"() => makeData({preset!r})")
        ref = online(data["scores"], data["V"], block, conditional, tau)
        assert len(ref) == n_keys // block
        for j, want in enumerate(ref):
            demo.click("#next")
            rows = demo.locator("#history tr")
            assert rows.count() == j + 1, "each click processes one block"
            got = rows.nth(j).evaluate("r => ({...r.dataset})")
            assert float(got["m"]) == pytest.approx(want["m"], rel=1e-12)
            assert float(got["alpha"]) == pytest.approx(want["alpha"], rel=1e-12, abs=1e-300)
            assert float(got["l"]) == pytest.approx(want["l"], rel=1e-12)
            assert json.loads(got["acc"]) == pytest.approx(want["acc"], rel=1e-12, abs=1e-12)
            assert (got["rescaled"] == "true") == want["rescaled"]
            if conditional:
                assert want["pmax"] <= 2 ** tau           # stale maxima keep exp2 within 2^8
            rescaled_somewhere |= want["rescaled"] and j > 0
            skipped_somewhere |= conditional and not want["rescaled"] and j > 0 and max(
                data["scores"][j * block:(j + 1) * block]) > ref[j - 1]["m"]
        out = json.loads(demo.get_attribute("#final", "data-out"))
        assert out == pytest.approx(softmax_v(data["scores"], data["V"]), rel=1e-9, abs=1e-12)
        assert out == pytest.approx([a / ref[-1]["l"] for a in ref[-1]["acc"]], rel=1e-12)
        assert demo.is_disabled("#next")
        demo.click("#reset")
        assert demo.locator("#history tr").count() == 0 and demo.get_attribute("#final", "data-out") is None
    assert rescaled_somewhere, "no preset ever rescales: the demo would not show the point"
    if conditional:
        assert skipped_somewhere, "no preset shows a rescale that conditional rescaling skips"


def test_the_toggle_and_the_steps_change_what_is_shown(demo: object) -> None:
    demo.select_option("#preset", "rising")
    demo.click("#all")
    plain = demo.inner_text("#history")
    demo.click("#conditional")
    conditional = demo.inner_text("#history")
    assert plain != conditional and "skipped" in conditional and "skipped" not in plain
    chart = demo.inner_html("#chart")
    demo.click("#prev")
    assert demo.locator("#history tr").count() == 7 and demo.inner_html("#chart") != chart
    assert demo.inner_text("#final") == ""


@pytest.mark.parametrize("theme", THEMES)
def test_works_by_touch_on_a_phone(browser: object, demo_site: str, theme: str) -> None:
    with opened_demo(browser, demo_site, "online-softmax", theme=theme, width=390, touch=True) as page:
        assert page.evaluate("() => document.documentElement.dataset.theme") == theme
        for _ in range(3):
            page.locator("#next").tap()
        assert page.locator("#history tr").count() == 3
        box = page.locator("#next").bounding_box()
        assert box["height"] >= 36 and box["width"] >= 44
        page.locator("#conditional").tap()
        assert page.is_checked("#conditional")
        over = sideways_overflow(page)
        assert over <= 0, f"the demo scrolls sideways by {over} px"


def test_the_full_history_scrolls_inside_its_own_box_on_a_phone(browser: object, demo_site: str) -> None:
    """At 390 px the history of every block is wider than the screen: it scrolls sideways inside
    its own box (which a keyboard can reach), and the demo's page does not scroll sideways."""
    with opened_demo(browser, demo_site, "online-softmax", width=390, height=844, touch=True) as page:
        page.locator("#all").tap()
        assert page.locator("#history tr").count() == page.evaluate("() => KEYS / BLOCK")
        box = page.evaluate("""() => {
            const w = document.getElementById('history-wrap'), t = w.querySelector('table');
            const r = w.getBoundingClientRect();
            return {overflow: getComputedStyle(w).overflowX, table: t.scrollWidth, inner: w.clientWidth,
                    right: r.right, view: document.documentElement.clientWidth, tab: w.tabIndex,
                    role: w.getAttribute('role'), label: w.getAttribute('aria-label')};
        }""")
        assert box["overflow"] == "auto" and box["right"] <= box["view"], box
        assert box["table"] > box["inner"], box            # it does not fit: the box scrolls, by design
        assert box["tab"] == 0 and box["role"] == "region" and box["label"], box
        over = sideways_overflow(page)
        assert over <= 0, f"the demo's page scrolls sideways by {over} px at 390 px"
        page.eval_on_selector("#history-wrap", "w => { w.scrollLeft = w.scrollWidth; }")
        assert page.eval_on_selector("#history-wrap", "w => w.scrollLeft") > 0
        assert sideways_overflow(page) <= 0
