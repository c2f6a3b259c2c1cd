"""The mbarrier ring demo in a real browser, against a Python model of the full/empty protocol.

The demo is opened from browser_support's ``demo_site`` (no book build needed); every request
that leaves 127.0.0.1, every failed request and every JavaScript error fails the test.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_support import BROWSER_MARKS, browser, opened_demo, serious_axe_violations, sideways_overflow  # noqa: F401

DEMO = "mbarrier-ring"
CHAPTER = Path(__file__).resolve().parents[1] / "chapters" / "05-tma-mbarriers.md"
TILES, STAGE_BYTES, CHUNK = 8, 8192, 4096
CONSUMER_WARPS, WARP_THREADS = 4, 32            # kernel 2 of chapter 5: warps 1-4 consume
CONSUMERS = CONSUMER_WARPS * WARP_THREADS       # empty[s] counts one arrival per consumer thread
ACTORS = ["producer", "tma"] + [f"c{w}" for w in range(CONSUMER_WARPS)]

pytestmark = BROWSER_MARKS


# -- the protocol, modelled independently of the page ------------------------------------------------
class Barrier:
    """An mbarrier: a phase completes when pending arrivals and tx-count are both zero."""

    def __init__(self, count: int) -> None:
        self.count, self.phase, self.pending, self.tx = count, 0, count, 0

    def arrive(self, expect_tx: int = 0, threads: int = 1) -> bool:
        """`threads` threads each arrive once (the first also announcing `expect_tx` bytes)."""
        self.tx += expect_tx
        self.pending -= threads
        return self._complete()

    def complete_tx(self, n: int) -> bool:
        self.tx -= n
        return self._complete()

    def try_wait(self, parity: int) -> bool:
        return parity != self.phase % 2

    def _complete(self) -> bool:
        if self.pending == 0 and self.tx == 0:
            self.phase, self.pending = self.phase + 1, self.count
            return True
        return False


class Ring:
    """One producer, a FIFO copy engine delivering CHUNK bytes per move, four consumer warps whose
    32 threads each arrive once on the stage's empty barrier."""

    def __init__(self, depth: int, mistake: str = "none") -> None:
        self.depth, self.mistake, self.last = depth, mistake, -1
        self.full = [Barrier(1) for _ in range(depth)]
        self.empty = [Barrier(CONSUMERS) for _ in range(depth)]
        self.buf = [{"tile": -1, "status": "free", "left": 0} for _ in range(depth)]
        self.producer = 0
        self.inflight: list[tuple[int, int]] = []
        self.consumers = [{"next": 0, "seen": []} for _ in range(CONSUMER_WARPS)]

    def producer_parity(self) -> int:
        base = (self.producer // self.depth) % 2
        return base if self.mistake == "producer" else base ^ 1

    def consumer_parity(self, w: int) -> int:
        base = (self.consumers[w]["next"] // self.depth) % 2
        return base ^ 1 if self.mistake == "consumer" else base

    def act(self, actor: str) -> bool:
        if actor == "producer":
            p = self.producer
            if p >= TILES:
                return False
            s = p % self.depth
            if not self.empty[s].try_wait(self.producer_parity()):
                return False
            self.full[s].arrive(expect_tx=STAGE_BYTES)
            self.buf[s] = {"tile": p, "status": "loading", "left": STAGE_BYTES}
            self.inflight.append((s, p))
            self.producer += 1
            return True
        if actor == "tma":
            if not self.inflight:
                return False
            s, _ = self.inflight[0]
            self.buf[s]["left"] -= CHUNK
            if self.buf[s]["left"] == 0:
                self.buf[s]["status"] = "full"
                self.inflight.pop(0)
            self.full[s].complete_tx(CHUNK)
            return True
        w = int(actor[1])
        c = self.consumers[w]
        if c["next"] >= TILES:
            return False
        s = c["next"] % self.depth
        if not self.full[s].try_wait(self.consumer_parity(w)):
            return False
        b = self.buf[s]
        c["seen"].append(b["tile"] if b["status"] == "full" else -1)
        if self.empty[s].arrive(threads=WARP_THREADS):
            b["status"] = "free"
        c["next"] += 1
        return True

    def move(self, actor: str) -> bool:
        moved = self.act(actor)
        if moved:
            self.last = ACTORS.index(actor)
        return moved

    def next_actor(self) -> str | None:
        for k in range(1, len(ACTORS) + 1):
            a = ACTORS[(self.last + k) % len(ACTORS)]
            if copy.deepcopy(self).act(a):
                return a
        return None

    def public(self) -> dict:
        return {
            "depth": self.depth, "mistake": self.mistake,
            "full": [{"phase": b.phase, "pending": b.pending, "tx": b.tx} for b in self.full],
            "empty": [{"phase": b.phase, "pending": b.pending} for b in self.empty],
            "buf": [dict(b) for b in self.buf],
            "producer": self.producer, "inflight": [list(x) for x in self.inflight],
            "consumers": [{"next": c["next"], "seen": list(c["seen"])} for c in self.consumers],
        }


def test_the_model_itself_delivers_every_tile_in_order() -> None:
    for depth in (1, 2, 3, 4):
        for seed in range(50):
            ring, rng = Ring(depth), random.Random(seed)
            while any(c["next"] < TILES for c in ring.consumers):
                ring.move(rng.choice(ACTORS))
            assert all(c["seen"] == list(range(TILES)) for c in ring.consumers)
            assert all(b.pending == b.count and b.tx == 0 for b in ring.full + ring.empty)


# -- driving the page --------------------------------------------------------------------------------
@pytest.fixture()
def page(browser: object, demo_site: str) -> Iterator[object]:
    with opened_demo(browser, demo_site, DEMO, theme=None, width=1100) as p:
        yield p


BUTTONS = {a: f"#act-{a}" for a in ACTORS}


FIELDS = ("full-phase", "full-pending", "full-tx", "empty-phase", "empty-pending")


def shown(page: object) -> dict:
    """The state the page publishes, what its stage cards display and the producer's stage and
    parity, read in one round trip (every element named must be there exactly once)."""
    got = page.evaluate("""fields => {
        const one = (root, sel) => [...root.querySelectorAll(sel)];
        const body = one(document, 'body'), prod = one(document, '#actor-producer');
        const state = JSON.parse(body[0].dataset.state);
        const cards = [];
        for (let i = 0; i < state.depth; i++) {
            const card = one(document, `#stage-${i}`);
            cards.push(card.length !== 1 ? null
                : Object.fromEntries(fields.map(f => [f, one(card[0], `[data-field='${f}']`).map(e => e.innerText)])));
        }
        return {state: body[0].getAttribute('data-state'), cards,
                producer: prod.map(e => [e.getAttribute('data-stage'), e.getAttribute('data-parity')])};
    }""", list(FIELDS))
    cards = []
    for i, card in enumerate(got["cards"]):
        assert card is not None, f"stage {i} has no card (or more than one)"
        assert all(len(v) == 1 for v in card.values()), f"stage {i}: {card}"
        cards.append({f: int(v[0]) for f, v in card.items()})
    assert len(got["producer"]) == 1, "no producer (or more than one)"
    return {"state": json.loads(got["state"]), "cards": cards, "producer": got["producer"][0]}


def assert_matches(page: object, ring: Ring) -> None:
    got = shown(page)
    assert got["state"] == ring.public()
    for i, card in enumerate(got["cards"]):
        f, e = ring.full[i], ring.empty[i]
        assert card == {"full-phase": f.phase, "full-pending": f.pending, "full-tx": f.tx,
                        "empty-phase": e.phase, "empty-pending": e.pending}, f"stage {i}"
    p = ring.producer
    if p < TILES:
        stage, parity = got["producer"]
        assert stage == str(p % ring.depth)
        assert parity == str(ring.producer_parity())


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_stepping_follows_the_protocol_model(page: object, depth: int) -> None:
    page.select_option("#depth", str(depth))
    ring = Ring(depth)
    assert_matches(page, ring)
    rng = random.Random(depth)
    before = page.inner_text("#stages")
    for _ in range(60):                               # random moves, blocked ones included
        actor = rng.choice(ACTORS)
        page.click(BUTTONS[actor])
        ring.move(actor)
        assert_matches(page, ring)
    assert page.inner_text("#stages") != before       # stepping changed what the page shows
    for _ in range(200):                              # then "Next event" until the end
        actor = ring.next_actor()
        page.click("#act-next")
        if actor is None:
            break
        ring.move(actor)
        assert_matches(page, ring)
    assert actor is None and "Every tile was produced and consumed" in page.inner_text("#log")
    assert all(c["seen"] == list(range(TILES)) for c in ring.public()["consumers"])


def test_the_roles_and_counts_are_those_of_the_chapters_kernel(page: object) -> None:
    """Chapter 5's kernel 2: CONSUMER_WARPS consumer warps, empty[s] initialised with a count of
    32 per consumer warp (one arrival per thread); the demo shows and uses the same."""
    text = CHAPTER.read_text()
    warps = int(re.search(r"^CONSUMER_WARPS = (\d+)$", text, re.M).group(1))
    assert re.search(r"^CONSUMERS = 32 \* CONSUMER_WARPS$", text, re.M)
    assert "T.uint32(CONSUMERS)" in text                          # the empty barriers' count
    assert (warps, 32 * warps) == (CONSUMER_WARPS, CONSUMERS)
    assert page.evaluate("() => [CONSUMER_WARPS, CONSUMERS]") == [CONSUMER_WARPS, CONSUMERS]
    assert page.locator("[id^='act-c']").count() == CONSUMER_WARPS
    assert page.locator("#actors [id^='actor-c']").count() == CONSUMER_WARPS
    assert page.inner_text("#empty-count") == str(CONSUMERS)
    help_text = page.inner_text("p.help")
    assert "one arrival per consumer thread" in help_text and "four consumer warps" in page.inner_text("h2")
    assert page.locator("#stage-0 .bar.empty").inner_text().endswith(f"of {CONSUMERS}")
    # a warp's move is its 32 arrivals; the phase completes after the last warp
    page.click("#act-producer")
    page.click("#act-tma")
    page.click("#act-tma")
    for w in range(CONSUMER_WARPS):
        assert page.locator("#stage-0 [data-field='empty-phase']").inner_text() == "0"
        page.click(f"#act-c{w}")
        pending = int(page.locator("#stage-0 [data-field='empty-pending']").inner_text())
        assert pending == (CONSUMERS - WARP_THREADS * (w + 1) if w < CONSUMER_WARPS - 1 else CONSUMERS)
    assert page.locator("#stage-0 [data-field='empty-phase']").inner_text() == "1"


def test_a_fresh_ring_lets_the_producer_fill_every_stage(page: object) -> None:
    page.select_option("#depth", "3")
    for k in range(3):
        page.click("#act-producer")
        assert "passes" in page.inner_text("#log")
        assert page.locator(f"#stage-{k} [data-field='full-tx']").inner_text() == str(STAGE_BYTES)
    page.click("#act-producer")                       # tile 3 needs stage 0 back
    assert "blocks" in page.inner_text("#log") and "parity 0" in page.inner_text("#log")
    page.click("#act-tma")
    assert page.locator("#stage-0 [data-field='full-tx']").inner_text() == str(STAGE_BYTES - CHUNK)
    page.click("#act-tma")
    assert page.locator("#stage-0 [data-field='full-phase']").inner_text() == "1"
    assert page.locator("#stage-0 [data-field='buffer']").get_attribute("data-status") == "full"


def test_the_wrong_producer_parity_deadlocks(page: object) -> None:
    page.select_option("#mistake", "producer")
    page.click("#act-producer")
    assert "blocks" in page.inner_text("#log") and "parity 0" in page.inner_text("#log")
    page.click("#act-next")
    assert "deadlocked" in page.inner_text("#log")
    assert json.loads(page.get_attribute("body", "data-state")) == Ring(2, "producer").public()


def test_the_wrong_consumer_parity_reads_a_stage_before_its_data(page: object) -> None:
    page.select_option("#mistake", "consumer")
    ring = Ring(2, "consumer")
    page.click("#act-c0")
    ring.move("c0")
    assert_matches(page, ring)
    assert ring.consumers[0]["seen"] == [-1]
    assert "stage not loaded" in page.inner_text("#actor-c0")


def test_the_demo_fits_a_phone_and_follows_the_theme(browser: object, demo_site: str) -> None:
    with opened_demo(browser, demo_site, DEMO, theme="dark", width=390, height=800, touch=True) as p:
        assert p.evaluate("() => document.documentElement.dataset.theme") == "dark"
        bg = p.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert bg == "rgb(20, 24, 31)"
        over = sideways_overflow(p)
        assert over <= 0, f"the demo scrolls sideways by {over}px at 390px"
        p.tap("#act-producer")
        assert "passes" in p.inner_text("#log")
    with opened_demo(browser, demo_site, DEMO, theme="light", width=390, height=800, touch=True) as p:
        assert p.evaluate("() => getComputedStyle(document.body).backgroundColor") == "rgb(255, 255, 255)"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_no_serious_accessibility_violations(browser: object, demo_site: str, theme: str) -> None:
    with opened_demo(browser, demo_site, DEMO, theme=theme, width=1100) as p:
        p.click("#act-producer")
        p.click("#act-tma")
        bad = serious_axe_violations(p)
        assert not bad, bad
