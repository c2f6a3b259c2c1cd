"""A model of pipelined kernels that is tested against what it predicts.

Two pieces, each built from roofs that are measured by kernels other than the ones it
predicts:

- A ring of TMA loads from memory (chapter 5): Little's law, with a round trip that grows as
  the memory nears its bandwidth. The growth is the mean wait of a queue with a fixed service
  time (M/D/1, Pollaczek-Khinchine): `wait = trip * u / (2 (1 - u))` at utilisation `u`.
- A tiled GEMM (chapter 10H): per K tile, each SM needs the tensor core for its MMAs and the
  L2-to-shared-memory path for its stage, whose bytes come from L2 except those that miss it
  and come from HBM; a kernel that waits (for a round trip, for its MMAs) adds the wait.
  Tiles run in rounds over the SMs' CTA slots, and each tile pays a fixed cost (launch, ring
  fill, epilogue) that a one-K-tile run of the same kernel measures.

The machine's numbers (`Machine`) come from measurements named in each field's source; no
parameter is fitted to the times the model predicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


# -- a ring of loads from memory ---------------------------------------------------------------
def queue_factor(u: float) -> float:
    """How much longer a round trip takes at utilisation `u` of the memory than unloaded: one
    plus the mean wait of an M/D/1 queue in units of its service time, the whole unloaded trip
    taken as the service time (a simplification that chapter 5 tests against its ring)."""
    if not 0 <= u < 1:
        raise ValueError(f"utilisation must be in [0, 1), got {u}")
    return 1 + u / (2 * (1 - u))


def ring_seconds(depth: int, roof_s: float, trip_s: float) -> float:
    """Time of a streaming ring of `depth` stages per CTA.

    `roof_s`: the time at the memory's bandwidth (bytes moved / the copy's bandwidth).
    `trip_s`: the time if each CTA waited one *unloaded* round trip per stage, one stage at a
    time. With `depth` stages in flight the latency-bound time is `trip_s * q(u) / depth`, and
    the utilisation is `u = roof_s / time`; the time is the fixed point of the two, found by
    bisection (it is never below the roof).
    """
    if depth < 1:
        raise ValueError(f"a ring has at least one stage, got {depth}")
    lo, hi = 0.0, 1.0 - 1e-12          # utilisation
    for _ in range(200):
        u = (lo + hi) / 2
        if trip_s * queue_factor(u) / depth > roof_s / u:
            hi = u                      # at this utilisation the round trips take longer
        else:
            lo = u
    return roof_s / lo


def unloaded_trip(depth1_s: float, roof_s: float) -> float:
    """`trip_s` of `ring_seconds` from a measured depth-1 time: at one stage the ring is bound by
    its round trips, so depth1 = trip * q(roof / depth1)."""
    if depth1_s <= roof_s:
        raise ValueError("a depth-1 ring at the bandwidth roof says nothing about its round trip")
    return depth1_s / queue_factor(roof_s / depth1_s)


# -- the machine -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Machine:
    """The roofs of one GPU that the GEMM model uses, whole-GPU figures.

    `tensor_flops`: the dense 16-bit tensor-core rate the GPU sustains (FLOP/s).
    `l2_bandwidth`: TMA loads served by L2 into shared memory (bytes/s, all SMs).
    `l2_trip_s`: one stage's TMA round trip from L2, issue to full barrier.
    `mma_wait_s`: one warpgroup's K tile of MMAs (64 x 256 x 64) issued and waited for, with
    nothing else in flight: the MMAs' time plus the pipeline's latency.
    `hbm_bandwidth`, `l2_bytes`: where the bytes that miss L2 come from, and how much it holds.
    `sources`: where each number comes from.
    """

    name: str
    sms: int
    tensor_flops: float
    l2_bandwidth: float
    l2_trip_s: float
    mma_wait_s: float = 0.0
    hbm_bandwidth: float = 0.0
    l2_bytes: float = 0.0
    sources: dict[str, str] = field(default_factory=dict, compare=False)


# -- a tiled GEMM ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """What the GEMM model needs to know of a kernel: its tile, how many of its CTAs share an SM,
    whether each K tile waits for its own load (`synchronous`) or for its own MMAs
    (`waits_mma`: `wait_group(0)` before the stage is released), whether one CTA per SM
    walks the tiles (`persistent`), and in which order: row by row of tiles, or `group_m` rows
    of tiles walked column by column (grouped rasterization)."""

    name: str
    blk_m: int
    blk_n: int
    blk_k: int
    ctas_per_sm: int = 1
    synchronous: bool = False
    persistent: bool = False
    waits_mma: bool = False
    group_m: int = 0
    elem_bytes: int = 2
    l2_b_rows: int | None = None    # rows of B a CTA reads from L2 per K tile (a multicast shares them)


@dataclass(frozen=True)
class Prediction:
    """The model's time for one GEMM and what sets it."""

    seconds: float
    limit: str                 # the roof that binds: tensor core, L2 to shared memory, or waiting
    k_tile_s: float            # one K tile of the busiest SM at full occupancy
    rounds: float              # tiles per CTA slot (persistent) or rounds of CTAs
    per_tile_s: float


def stage_bytes(step: Step) -> int:
    """Bytes of A and B one CTA reads from L2 per K tile."""
    return (step.blk_m + (step.l2_b_rows or step.blk_n)) * step.blk_k * step.elem_bytes


def round_misses(M: int, N: int, K: int, step: Step, m: Machine, slots: int) -> tuple[float, float]:
    """(bytes of A and B a round of `slots` concurrent tiles touches, bytes of them that miss
    L2). A round covers a block of tile rows by tile columns in the step's order. If that
    block fits in L2, only what the round before did not touch misses (new rows of A, or new
    columns of B under grouping); if it does not fit, least-recently-used replacement has
    evicted it by the time it is reused, and all of it misses."""
    tiles_m, tiles_n = math.ceil(M / step.blk_m), math.ceil(N / step.blk_n)
    if step.group_m:
        rows = min(step.group_m, tiles_m)
        cols = min(math.ceil(slots / rows), tiles_n)
    else:
        cols = min(tiles_n, slots)
        rows = min(math.ceil(slots / tiles_n), tiles_m)
    a_bytes, b_bytes = rows * step.blk_m * K * step.elem_bytes, cols * step.blk_n * K * step.elem_bytes
    touched = a_bytes + b_bytes
    if touched > m.l2_bytes:
        return touched, touched
    return touched, (b_bytes if step.group_m else a_bytes)


def _k_tile(step: Step, m: Machine, ctas: int, miss_fraction: float = 0.0) -> tuple[float, str]:
    """Seconds of one K tile on one SM with `ctas` CTAs of `step` resident, and the roof; a
    `miss_fraction` of the stage's bytes comes from HBM (its share per SM) instead of L2."""
    per_sm_flops = m.tensor_flops / m.sms
    mma = 2 * step.blk_m * step.blk_n * step.blk_k / per_sm_flops
    stage = stage_bytes(step)
    load = stage * (1 - miss_fraction) / (m.l2_bandwidth / m.sms)
    if miss_fraction:
        load += stage * miss_fraction / (m.hbm_bandwidth / m.sms)
    roofs = [(ctas * mma, "tensor core"),
             (ctas * load, "L2 to shared memory" + (" (with HBM misses)" if miss_fraction > 0.05 else ""))]
    # A CTA that waits: its load's round trip (synchronous), then its MMAs, issued and waited
    # for (the probe's time for one warpgroup's 64 rows, per 64 rows of the tile).
    chain = (m.l2_trip_s if step.synchronous else 0.0) + (
        m.mma_wait_s * step.blk_m / 64 if step.waits_mma else (mma if step.synchronous else 0.0))
    if chain:
        roofs.append((chain, "waiting (round trips and MMA latency)" if step.synchronous else "waiting for the MMAs"))
    return max(roofs)


def gemm_seconds(M: int, N: int, K: int, step: Step, m: Machine, per_tile_s: float) -> Prediction:
    """The model's time of D = A @ B.T (M x N x K) for `step` on `m`."""
    tiles = math.ceil(M / step.blk_m) * math.ceil(N / step.blk_n)
    k_tiles = math.ceil(K / step.blk_k)
    slots = m.sms * (1 if step.persistent else step.ctas_per_sm)
    stage = stage_bytes(step)
    miss = 0.0
    if m.l2_bytes and m.hbm_bandwidth:
        _, missed = round_misses(M, N, K, step, m, slots)
        miss = min(1.0, missed / (min(slots, tiles) * k_tiles * stage))
    if step.persistent:
        per_cta = math.ceil(tiles / m.sms)
        t, limit = _k_tile(step, m, 1, miss)
        return Prediction(per_cta * (k_tiles * t + per_tile_s), limit, t, per_cta, per_tile_s)
    full, rest = divmod(tiles, slots)
    t, limit = _k_tile(step, m, step.ctas_per_sm, miss)
    seconds = full * (k_tiles * t + per_tile_s)
    if rest:                            # the last round: fewer CTAs on the busiest SM
        last, _ = _k_tile(step, m, math.ceil(rest / m.sms), miss)
        seconds += k_tiles * last + per_tile_s
    return Prediction(seconds, limit, t, full + (rest / slots), per_tile_s)


def per_tile_cost(measured_s: float, M: int, N: int, K: int, step: Step, m: Machine) -> float:
    """The fixed cost per tile that makes the model give `measured_s` at M x N x K: the time is
    affine in it, so two evaluations solve for it. Measured at one K tile, it is the launch, the
    ring's fill and the epilogue, with as little of the main loop as the kernel can run."""
    at0 = gemm_seconds(M, N, K, step, m, 0.0).seconds
    at1 = gemm_seconds(M, N, K, step, m, 1.0).seconds
    return max(0.0, (measured_s - at0) / (at1 - at0))


def error(predicted_s: float, measured_s: float) -> float:
    """Signed relative error of a prediction, (predicted - measured) / measured."""
    return predicted_s / measured_s - 1

