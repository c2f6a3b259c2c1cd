"""The FA4 kernel's barrier protocol, drawn: who arrives on which barrier and who waits."""

from __future__ import annotations

from typing import Any


# -- the barrier protocol, drawn ---------------------------------------------------------------------
ROLES = ("TMA warp", "MMA warp", "softmax warpgroup")


def protocol_events(n_kv: int = 3) -> list[tuple[str, str, str, str]]:
    """(from role, event, to role, barrier) for a Q tile with n_kv KV blocks, in issue order."""
    ev: list[tuple[str, str, str, str]] = [("TMA warp", "Q", "MMA warp", "q_full")]
    loads = ["K0"] + (["K1"] if n_kv > 1 else [])
    for j in range(n_kv):
        loads += [f"V{j}"] + ([f"K{j + 2}"] if j + 2 < n_kv else [])
    for item in loads:
        ev.append(("TMA warp", item, "MMA warp", "ring.full"))
    ev.append(("MMA warp", "S0 = Q K0ᵀ", "softmax warpgroup", "s_full[0]"))
    if n_kv > 1:
        ev.append(("MMA warp", "S1 = Q K1ᵀ", "softmax warpgroup", "s_full[1]"))
    for j in range(n_kv):
        b = j % 2
        ev.append(("softmax warpgroup", f"P{j} in S{b}", "MMA warp", f"p_full[{b}]"))
        ev.append(("MMA warp", f"O += P{j} V{j}", "softmax warpgroup", f"pv_done[{b}]"))
        if j + 2 < n_kv:
            ev.append(("MMA warp", f"S{b} = Q K{j + 2}ᵀ", "softmax warpgroup", f"s_full[{b}]"))
    return ev


def plot_protocol(n_kv: int = 3) -> Any:
    """Swimlanes of the three roles over a Q tile of n_kv KV blocks: each hand-over an arrow from
    the role that arrives on a barrier to the role that waits on it, labelled with the barrier."""
    from .plots import PAGE_WIDTH_IN, PALETTE, SIZES, new_figure

    # one time step per MMA-warp action; TMA loads run ahead, softmax follows each S
    fig = new_figure(PAGE_WIDTH_IN, 4.4)
    ax = fig.add_subplot()
    ax.set_facecolor("white")
    y = {"TMA warp": 2.0, "MMA warp": 1.0, "softmax warpgroup": 0.0}
    colors = {"q_full": PALETTE["grey"], "ring.full": PALETTE["blue"], "s_full": PALETTE["green"],
              "p_full": PALETTE["vermillion"], "pv_done": PALETTE["purple"]}
    mma_seq = ["QK0"] + (["QK1"] if n_kv > 1 else [])
    for j in range(n_kv):
        mma_seq += [f"PV{j}"] + ([f"QK{j + 2}"] if j + 2 < n_kv else [])
    t_mma = {name: 1.6 + 1.3 * i for i, name in enumerate(mma_seq)}
    t_load = {("K" + n[2:]) if n.startswith("QK") else ("V" + n[2:]): t - 0.65 for n, t in t_mma.items()}
    t_soft = {j: t_mma[f"QK{j}"] + 0.65 + (0.65 if j else 0.0) for j in range(n_kv)}
    for j in range(1, n_kv):
        t_soft[j] = max(t_soft[j], t_mma[f"PV{j - 1}"] + 0.65)
    for yy in y.values():
        ax.axhline(yy, color="#bbbbbb", lw=0.8, zorder=0)

    def box(t, yy, text, color):
        ax.text(t, yy, text, fontsize=SIZES["note"], ha="center", va="center",
                bbox=dict(boxstyle="round,pad=0.25", fc="white", ec=color, lw=1.2), zorder=3)

    def arrow(t0, y0, t1, y1, color):
        down = y1 < y0
        ax.annotate("", xy=(t1, y1 + (0.17 if down else -0.17)), xytext=(t0, y0 + (-0.17 if down else 0.17)),
                    arrowprops=dict(arrowstyle="->", color=color, lw=1.2), zorder=2)

    box(0.25, y["TMA warp"], "Q", colors["q_full"])
    arrow(0.25, y["TMA warp"], t_mma["QK0"] - 0.25, y["MMA warp"], colors["q_full"])
    for item, t in t_load.items():
        box(t, y["TMA warp"], item, colors["ring.full"])
        mma = ("QK" + item[1:]) if item[0] == "K" else ("PV" + item[1:])
        arrow(t, y["TMA warp"], t_mma[mma], y["MMA warp"], colors["ring.full"])
    for name, t in t_mma.items():
        box(t, y["MMA warp"], name, PALETTE["black"])
    for j in range(n_kv):
        box(t_soft[j], y["softmax warpgroup"], f"softmax {j}", PALETTE["black"])
        arrow(t_mma[f"QK{j}"], y["MMA warp"], t_soft[j] - 0.15, y["softmax warpgroup"], colors["s_full"])
        arrow(t_soft[j] + 0.15, y["softmax warpgroup"], t_mma[f"PV{j}"], y["MMA warp"], colors["p_full"])
        if j + 1 < n_kv:
            arrow(t_mma[f"PV{j}"], y["MMA warp"], t_soft[j + 1] + 0.3, y["softmax warpgroup"], colors["pv_done"])
        if j + 2 < n_kv:
            arrow(t_mma[f"PV{j}"] + 0.1, y["MMA warp"] + 0.05, t_mma[f"QK{j + 2}"] - 0.3, y["MMA warp"] + 0.05,
                  colors["pv_done"])
    t_epi = t_mma[f"PV{n_kv - 1}"] + 1.0
    box(t_epi, y["softmax warpgroup"], "epilogue", PALETTE["black"])
    arrow(t_mma[f"PV{n_kv - 1}"], y["MMA warp"], t_epi, y["softmax warpgroup"], colors["pv_done"])
    from matplotlib.lines import Line2D

    legend = [("q_full: Q has landed", "q_full"), ("ring.full[stage]: a K or V block has landed", "ring.full"),
              ("s_full[b]: S_b = Q Kᵀ is done", "s_full"), ("p_full[b]: P is in TMEM, O corrected", "p_full"),
              ("pv_done[b]: O += P V is done", "pv_done")]
    ax.legend([Line2D([], [], color=colors[c], lw=2) for _, c in legend], [t for t, _ in legend],
              loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=2, fontsize=SIZES["legend"],
              frameon=False)
    ax.set_xlim(-0.1, t_epi + 0.6)
    ax.set_ylim(-0.45, 2.45)
    ax.set_yticks([y[r] for r in ROLES])
    ax.set_yticklabels(list(ROLES), fontsize=SIZES["label"])
    ax.tick_params(axis="y", length=0)
    ax.set_xticks([])
    ax.set_title("time runs to the right (issue order; widths not to scale)", fontsize=SIZES["label"])
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig
