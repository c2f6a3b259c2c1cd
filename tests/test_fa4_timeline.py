"""The event model of the FA4 schedules (chapter 11B): every event obeys the kernels' barrier
protocol, written out here independently of the model, and starts as soon as it may."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from gpubook import fa4_timeline as ft
from gpubook import plots

DEFAULTS = dict(mma=512, softmax=1000, alpha_frac=0.3, corr=300, corr_skip=40, epi=600, wake=100)


def two_tile_protocol(n: int, p: dict, rescale) -> tuple[dict, dict, dict]:
    """The two-Q-tile kernel, from its description: each lane's steps in program order, each
    step's waits as (label or mark, delay), each step's duration."""
    w, mma = p["wake"], p["mma"]
    issue = ["QK0(0)", "QK1(0)"]
    for j in range(n):
        for i in (0, 1):
            issue.append(f"PV{i}({j})")
            if j + 1 < n:
                issue.append(f"QK{i}({j + 1})")
    lanes = {ft.TENSOR: issue, "softmax 0": [], "softmax 1": [], ft.CORRECTION: []}
    waits, dur = {}, {}
    for j in range(n):
        for i in (0, 1):
            waits[f"QK{i}({j})"] = [(f"PV{i}({j - 1})", w)] if j else []
            waits[f"PV{i}({j})"] = [(f"softmax{i}({j})", 0), (f"corr{i}({j})", 0)]
            dur[f"QK{i}({j})"] = dur[f"PV{i}({j})"] = mma
            lanes[f"softmax {i}"].append(f"softmax{i}({j})")
            waits[f"softmax{i}({j})"] = [(f"QK{i}({j})", w)]
            dur[f"softmax{i}({j})"] = p["softmax"]
            lanes[ft.CORRECTION].append(f"corr{i}({j})")
            waits[f"corr{i}({j})"] = [(f"α{i}({j})", 0)] + ([(f"PV{i}({j - 1})", w)] if j else [])
            dur[f"corr{i}({j})"] = p["corr"] if j and rescale[i][j] else p["corr_skip"]
    for i in (0, 1):
        lanes[ft.CORRECTION].append(f"epi{i}")
        waits[f"epi{i}"] = [(f"PV{i}({n - 1})", w)]
        dur[f"epi{i}"] = p["epi"]
    return lanes, waits, dur


def one_tile_protocol(n: int, p: dict, rescale) -> tuple[dict, dict, dict]:
    """The one-Q-tile kernel: QK(j + 2) reuses S_(j mod 2) and so waits for PV(j); the softmax
    corrects O itself, after PV(j - 1), before it hands P(j) over."""
    w, mma = p["wake"], p["mma"]
    issue = ["QK(0)"] + (["QK(1)"] if n > 1 else [])
    lanes = {ft.TENSOR: issue, "softmax": []}
    waits, dur = {"QK(0)": [], "QK(1)": []}, {}
    for j in range(n):
        issue.append(f"PV({j})")
        waits[f"PV({j})"] = [(f"corr({j})", 0)]
        if j + 2 < n:
            issue.append(f"QK({j + 2})")
            waits[f"QK({j + 2})"] = [(f"PV({j})", w)]
        dur[f"QK({j})"] = dur[f"PV({j})"] = mma
        lanes["softmax"] += [f"softmax({j})", f"corr({j})"]
        waits[f"softmax({j})"] = [(f"QK({j})", w)]
        waits[f"corr({j})"] = [(f"PV({j - 1})", w)] if j else []
        dur[f"softmax({j})"] = p["softmax"]
        dur[f"corr({j})"] = p["corr"] if j and rescale[0][j] else p["corr_skip"]
    lanes["softmax"].append("epi")
    waits["epi"] = [(f"PV({n - 1})", w)]
    dur["epi"] = p["epi"]
    return lanes, waits, dur


def check_protocol(tl: ft.Timeline, lanes: dict, waits: dict, dur: dict, alpha_frac: float) -> None:
    """Raise unless the timeline runs exactly the protocol's steps, each for its duration, each
    lane in program order without overlap, and each step starting exactly when the protocol lets
    it: after its lane's previous step and after every wait (for the MMA warp, which blocks at
    a wait, after every wait of the MMAs issued before it too)."""
    by_label = {e.label: e for e in tl.events}
    assert len(by_label) == len(tl.events), "labels repeat"
    assert set(by_label) == {s for steps in lanes.values() for s in steps}, "not the protocol's steps"
    t = {label: e.end for label, e in by_label.items()} | tl.marks
    for label, e in by_label.items():
        assert e.end - e.start == pytest.approx(dur[label]), f"{label} lasts {e.end - e.start}"
        if label.startswith("softmax"):
            mark = "α" + label[len("softmax"):]
            assert tl.marks[mark] == pytest.approx(e.start + alpha_frac * dur[label]), mark
    for role, steps in lanes.items():
        got = [e.label for e in tl.lane(role)]
        assert got == steps, f"{role} runs {got}, not {steps}"
        assert all(e.role == role for e in map(by_label.get, steps))
        prev_end, issued = 0.0, 0.0
        for s in steps:
            bound = max([0.0] + [t[dep] + d for dep, d in waits[s]])
            if role == ft.TENSOR:                    # one thread issues in order and blocks at waits
                issued = bound = max(issued, bound)
            e = by_label[s]
            assert e.start >= prev_end, f"{s} starts at {e.start} while {role} is busy until {prev_end}"
            assert e.start >= bound, f"{s} starts at {e.start} before its waits pass at {bound}"
            assert e.start == pytest.approx(max(prev_end, bound)), f"{s} starts late: {e.start}"
            prev_end = e.end


RESCALE = [[False, False, True, False, True, False], [False, True, False, False, False, True]]


@pytest.mark.parametrize("n", [1, 2, 3, 6])
@pytest.mark.parametrize("params", [DEFAULTS, dict(DEFAULTS, softmax=0, corr=0, corr_skip=0),
                                    dict(DEFAULTS, softmax=2600, wake=0, alpha_frac=1.0)])
@pytest.mark.parametrize("rescale", [None, RESCALE])
def test_two_tile_schedule_follows_the_protocol(n, params, rescale):
    table = [row[:n] for row in rescale] if rescale else [[False] * n] * 2
    tl = ft.simulate(n, **params, rescale=table if rescale else None)
    check_protocol(tl, *two_tile_protocol(n, params, table), params["alpha_frac"])
    # the rules the chapter states, spelled out
    w = params["wake"]
    for i in (0, 1):
        for j in range(n):
            pv = tl.event(f"PV{i}({j})")
            assert pv.start >= tl.event(f"softmax{i}({j})").end and pv.start >= tl.event(f"corr{i}({j})").end
            if j + 1 < n:
                assert tl.event(f"QK{i}({j + 1})").start >= pv.end + w
    mmas = tl.mmas
    assert all(a.end <= b.start for a, b in zip(mmas, mmas[1:])), "two MMAs at once"
    assert tl.rescaled == {f"corr{i}({j})" for i in (0, 1) for j in range(1, n) if table[i][j]}


@pytest.mark.parametrize("n", [1, 2, 3, 6])
@pytest.mark.parametrize("params", [DEFAULTS, dict(DEFAULTS, softmax=0, corr=0, corr_skip=0),
                                    dict(DEFAULTS, softmax=2600, wake=0, alpha_frac=1.0)])
def test_one_tile_schedule_follows_the_protocol(n, params):
    table = [RESCALE[0][:n]]
    tl = ft.simulate(n, two_q_tiles=False, **params, rescale=table)
    check_protocol(tl, *one_tile_protocol(n, params, table), params["alpha_frac"])
    for j in range(n - 2):
        assert tl.event(f"QK({j + 2})").start >= tl.event(f"PV({j})").end + params["wake"]


def test_the_protocol_check_catches_a_broken_schedule():
    params, n = DEFAULTS, 4
    spec = two_tile_protocol(n, params, [[False] * n] * 2)
    good = ft.simulate(n)
    check_protocol(good, *spec, 0.3)

    def broken(label, shift):
        tl = ft.simulate(n)
        tl.events = [e._replace(start=e.start + shift, end=e.end + shift) if e.label == label else e
                     for e in tl.events]
        return tl

    for label, shift in [("PV0(1)", -1), ("QK1(2)", -1), ("softmax1(2)", -1), ("corr0(3)", -1),
                         ("epi1", -1), ("PV1(3)", 5)]:
        with pytest.raises(AssertionError):
            check_protocol(broken(label, shift), *spec, 0.3)
    swapped = ft.simulate(n)                       # two MMAs in the other order
    a, b = (swapped.events.index(swapped.event(x)) for x in ("QK0(1)", "PV1(0)"))
    ea, eb = swapped.events[a], swapped.events[b]
    swapped.events[a], swapped.events[b] = ea._replace(label=eb.label), eb._replace(label=ea.label)
    with pytest.raises(AssertionError):
        check_protocol(swapped, *spec, 0.3)


@pytest.mark.parametrize("n", [2, 4, 16])
def test_without_softmax_work_only_the_wake_ups_idle_the_tensor_core(n):
    tl = ft.simulate(n, softmax=0, corr=0, corr_skip=0)
    mmas = tl.mmas
    gaps = [b.start - a.end for a, b in zip(mmas, mmas[1:])]
    assert set(gaps) <= {0.0, 100.0}
    # one wake-up before every QK after the first block: its PV was the last MMA in the queue
    assert [b.label for a, b in zip(mmas, mmas[1:]) if b.start > a.end] == \
        [f"QK{i}({j})" for j in range(1, n) for i in (0, 1)]
    busy = 4 * n * 512
    assert tl.tensor_busy == busy
    assert tl.utilization == pytest.approx(busy / (busy + 2 * (n - 1) * 100))
    assert tl.utilization > 0.9
    assert ft.simulate(n, softmax=0, corr=0, corr_skip=0, wake=0).utilization == 1.0


@pytest.mark.parametrize("n", [4, 16])
@pytest.mark.parametrize("softmax", [1000, 1500, 2000, 3000])
def test_two_q_tiles_keep_the_tensor_core_busier_when_the_softmax_is_long(n, softmax):
    one = ft.simulate(n, two_q_tiles=False, softmax=softmax).utilization
    two = ft.simulate(n, softmax=softmax).utilization
    assert two > one
    if softmax >= 1500:
        assert two > one + 0.05


def test_a_long_softmax_starves_the_one_tile_kernel():
    # per block the one-tile kernel's tensor core runs 2 MMAs while the softmax must finish its
    # block and correction in between: past 1000 cycles the softmax sets the pace
    pts = ft.sweep_softmax([0, 1000, 2000, 4000], n_kv=16)
    assert [p.softmax for p in pts] == [0, 1000, 2000, 4000]
    ones = [p.one_tile for p in pts]
    twos = [p.two_tiles for p in pts]
    assert ones == sorted(ones, reverse=True) and twos == sorted(twos, reverse=True)
    assert ones[-1] < 0.3 < twos[-1]
    assert pts[1] == (1000, ft.simulate(16, False).utilization, ft.simulate(16).utilization)


def test_a_rescale_delays_the_pv_that_waits_for_it():
    base = ft.simulate(4)
    slow = ft.simulate(4, rescale=[[False, False, True, False], [False] * 4])
    step = slow.event("corr0(2)")
    assert step.end - step.start == 300 and "corr0(2)" in slow.rescaled
    assert slow.event("PV0(2)").start >= step.end
    assert slow.makespan >= base.makespan
    assert ft.simulate(4, rescale=[[True] + [False] * 3] * 2).events == base.events  # nothing to rescale in block 0


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        ft.simulate(0)
    with pytest.raises(ValueError):
        ft.simulate(4, alpha_frac=1.5)
    with pytest.raises(ValueError):
        ft.simulate(4, wake=-1)
    with pytest.raises(ValueError):
        ft.simulate(4, rescale=[[False] * 4])           # the two-tile kernel needs two rows
    with pytest.raises(ValueError):
        ft.simulate(4, two_q_tiles=False, rescale=[[False] * 3])


def test_a_protocol_that_waits_in_a_circle_is_reported():
    a, b = ft._Role("a"), ft._Role("b")
    a.add("x", 1, [("y", 0)])
    b.add("y", 1, [("x", 0)])
    with pytest.raises(RuntimeError, match="deadlock"):
        ft._run([a, b])


def test_the_figure_has_a_lane_per_role_and_a_bar_per_event():
    two, one = ft.simulate(4), ft.simulate(4, two_q_tiles=False)
    fig = ft.plot(two, one)
    top, bottom = fig.axes
    assert [t.get_text() for t in top.get_yticklabels()] == ["tensor core", "softmax 0", "softmax 1", "correction"]
    assert [t.get_text() for t in bottom.get_yticklabels()] == ["tensor core", "softmax"]
    for ax, tl in ((top, two), (bottom, one)):
        bars = {p.get_gid(): p for p in ax.patches if p.get_gid()}
        assert set(bars) == {f"{tl.kernel}:{e.label}" for e in tl.events}
        for e in tl.events:
            bar = bars[f"{tl.kernel}:{e.label}"]
            assert (bar.get_x(), bar.get_width()) == pytest.approx((e.start, e.end - e.start))
            assert bar.get_y() + bar.get_height() / 2 == pytest.approx(tl.lanes.index(e.role))
        assert f"{tl.utilization:.0%}" in ax.get_title(loc="left")
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"QK, Q tile 0", "PV, Q tile 1", "epilogue", "α handed over", "tensor core idle"} <= set(legend)
    assert fig.get_figwidth() == plots.PAGE_WIDTH_IN
    with Image.open(io.BytesIO(plots.png_bytes(fig))) as im:
        assert float(im.text["gpubook:min-font-pt"]) >= plots.MIN_FONT_PT
        assert im.getpixel((2, 2))[:3] == (255, 255, 255)
    with pytest.raises(ValueError):
        ft.plot()


def test_the_sweep_figure_draws_both_kernels():
    pts = ft.sweep_softmax([0, 1000, 2000], n_kv=4)
    fig = ft.plot_sweep(pts, n_kv=4)
    lines = {line.get_gid(): line for line in fig.axes[0].lines}
    assert list(lines["sweep-one"].get_ydata()) == pytest.approx([100 * p.one_tile for p in pts])
    assert list(lines["sweep-two"].get_ydata()) == pytest.approx([100 * p.two_tiles for p in pts])
    assert "4 KV blocks" in fig.axes[0].get_xlabel()


def test_dropping_the_pv_wait_lets_each_qk_follow_its_pv_at_once():
    """FA4's published order: QK_i(j+1) is issued right behind PV_i(j), with no wake-up between."""
    for two in (True, False):
        waits = ft.simulate(8, two_q_tiles=two, softmax=300)
        free = ft.simulate(8, two_q_tiles=two, softmax=300, pv_wait=False)
        assert free.utilization > waits.utilization
        pairs = ([(f"PV{i}({j})", f"QK{i}({j + 1})") for i in (0, 1) for j in range(7)] if two else
                 [(f"PV({j})", f"QK({j + 2})") for j in range(6)])
        for pv, qk in pairs:
            assert waits.event(qk).start >= waits.event(pv).end + waits.params["wake"]
        assert any(free.event(qk).start < free.event(pv).end + free.params["wake"] for pv, qk in pairs)
