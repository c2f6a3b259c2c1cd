"""What a check's shape makes a kernel do: the protocol a small check must still exercise.

A check passes on the code its inputs reach. A ring of STAGES buffers that sees fewer than
STAGES K-tiles never flips a parity nor makes the producer wait; a persistent kernel whose
CTAs get one tile each never carries its ring from tile to tile; an attention kernel with a
single block of keys never rescales. Each function here asserts one such property from the
kernel's constants and returns a line that says what the shape exercises:

- `ring(k_tiles, stages)`: K-tiles >= 2 STAGES + 1, so every slot is filled at least twice
  and slot 0 three times: each barrier is waited on at both parities, and the producer waits
  for a slot the consumer has released;
- `rounds(tiles, ctas)`: >= 3 work tiles for every CTA of a persistent launch;
- `kv_blocks(seqlen, block)`: >= 3 blocks of keys for the query tile that sees the most;
- `attention(cases, block)`: over the checks of one kernel, a ragged last block of keys in at
  least one, and in at least one a row maximum that a late block raises (`late_rise`,
  measured on the inputs; `plant_late_max` makes such inputs).

A shape kept smaller on purpose names its reason (`short="..."`): the function then returns a
line that says what the shape leaves untested, by how much it falls short and why it was kept
short ("ring coverage: 4 K-tiles over 6 stages, slot 0 filled once — short of coverage: the
check's K does not wrap the ring, so no slot is reused: ... (needs K-tiles >= 13, 9 short);
kept short on purpose: ...") instead of raising, and raises when the shape no longer needs the reason;
`kept_short` gives one reason to those cases of a loop that need it, and `sim_seconds` states
the cost that reason avoids from the committed simulation records.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

RING_REFILLS = 2    # K-tiles >= 2 STAGES + 1: slot 0 filled 3 times, both parities flip, the producer waits
MIN_ROUNDS = 3      # work tiles per CTA: the first, one carried over, and one after a carry
MIN_KV_BLOCKS = 3   # blocks of keys: the first, a rescale, and one after a rescale
MIN_RISE = 4.0      # a late block's max above the running max, in logits: alpha = e^-4 < 0.02


class CoverageError(AssertionError):
    """A check's shape does not exercise a property its kernel relies on."""


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _verdict(what: str, ok: bool, shortfall: str, short: str | None, untested: str = "") -> str:
    """The line a check prints beside its shape: `what` it exercises; kept short on purpose
    (`short`, the reason), what the shape leaves untested and by how much it falls short."""
    if short is not None:
        if ok:
            raise CoverageError(f"{what}: covered, yet marked short ({short!r}): drop the reason")
        return (f"{what} — short of coverage: {untested + ' ' if untested else ''}({shortfall}); "
                f"kept short on purpose: {short}")
    if not ok:
        raise CoverageError(f"{what}: {untested + ' ' if untested else ''}({shortfall})")
    return what


def ring(k_tiles: int, stages: int, *, short: str | None = None) -> str:
    """Assert that a ring of `stages` slots fed `k_tiles` tiles fills every slot at least twice."""
    if stages < 1 or k_tiles < 1:
        raise ValueError(f"stages and k_tiles must be >= 1, got {stages}, {k_tiles}")
    need = RING_REFILLS * stages + 1
    fills = -(-k_tiles // stages)
    what = (f"ring coverage: {k_tiles} K-tiles over {stages} stages, slot 0 filled {_times(fills)}"
            + (", both parities flip and the producer waits" if k_tiles >= need else ""))
    if fills == 1:
        untested = ("the check's K does not wrap the ring, so no slot is reused: the parity flip and "
                    "the producer's wait for a freed slot are untested by it")
    else:
        untested = ("the ring wraps only once, so no barrier comes back to its first parity: a slot "
                    "reused a second time is untested by it")
    return _verdict(what, k_tiles >= need,
                    f"needs K-tiles >= 2 * STAGES + 1 = {need}, {need - k_tiles} short", short, untested)


def rounds(tiles: int, ctas: int, *, short: str | None = None) -> str:
    """Assert that every CTA of a persistent launch of `ctas` CTAs over `tiles` tiles gets >= 3."""
    if ctas < 1 or tiles < 1:
        raise ValueError(f"tiles and ctas must be >= 1, got {tiles}, {ctas}")
    least, most = tiles // ctas, -(-tiles // ctas)
    spread = f"{least}" if least == most else f"{least}-{most}"
    what = f"persistent: {tiles} tiles over {ctas} CTA{'s' * (ctas > 1)}, {spread} per CTA"
    untested = ("a CTA that serves fewer than three tiles never carries its state into a tile that "
                "itself follows a carried one, so that path is untested by the check")
    return _verdict(what, least >= MIN_ROUNDS,
                    f"needs >= {MIN_ROUNDS} tiles for every CTA, the last gets {least}: "
                    f"at most {tiles // MIN_ROUNDS} CTAs, or >= {MIN_ROUNDS * ctas} tiles", short, untested)


def kv_blocks(seqlen: int, block: int, *, short: str | None = None) -> str:
    """Assert that the query tile seeing the most keys walks >= 3 blocks of `block` keys."""
    if seqlen < 1 or block < 1:
        raise ValueError(f"seqlen and block must be >= 1, got {seqlen}, {block}")
    n = -(-seqlen // block)
    tail = seqlen % block
    what = f"keys: {seqlen} = {n} blocks of {block}" + (f", the last holds {tail}" if tail else "")
    untested = ("with fewer than three blocks of keys no rescale of the running softmax follows "
                "another, so that path is untested by the check")
    return _verdict(what, n >= MIN_KV_BLOCKS,
                    f"needs >= {MIN_KV_BLOCKS} blocks, i.e. seqlen > {(MIN_KV_BLOCKS - 1) * block}, "
                    f"{(MIN_KV_BLOCKS - 1) * block + 1 - seqlen} short", short, untested)


def _logits(q: Any, k: Any) -> Any:
    """(batch, heads, Sq, Sk) scaled logits in float64; K's heads shared by heads // kv_heads."""
    q, k = q.double(), k.double()
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    return q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5


def late_rise(q: Any, k: Any, block: int, causal: bool = False) -> float:
    """The most a block of keys after the second raises a row's running max, in logits (<= 0 if
    none does): how far the rescale at that block moves the row's accumulator (alpha = e^-rise).
    q, k: (batch, heads, seqlen, d), k with heads or kv_heads heads; causal masks top-left."""
    import torch

    s = _logits(q, k)
    sq, sk = s.shape[-2], s.shape[-1]
    if causal:
        keep = torch.arange(sk)[None, :] <= torch.arange(sq)[:, None]
        s = s.masked_fill(~keep, float("-inf"))
    best = float("-inf")
    for b in range(MIN_KV_BLOCKS - 1, -(-sk // block)):
        before = s[..., : b * block].amax(-1)
        here = s[..., b * block: (b + 1) * block].amax(-1)
        rise = (here - before)[torch.isfinite(here)]
        if rise.numel():
            best = max(best, float(rise.max()))
    return best


def plant_late_max(q: Any, k: Any, scale: float = 2.0) -> tuple[int, int]:
    """Make the last key hold the last query row's max (batch 0, head 0), in place: that key
    becomes `scale` times the sign pattern of the query row. Returns (row, key)."""
    row = key = k.shape[2] - 1
    k[0, 0, key] = (q[0, 0, row].float().sign() * scale).to(k.dtype)
    return row, key


def attention(cases: Sequence[dict[str, Any]], block: int, *, short: str | None = None) -> str:
    """Assert, over the checks of one attention kernel, a ragged last block of keys in one case
    and a late row maximum (`late_rise` >= 4) in one. Each case: seqlen, and q, k, causal for
    the late maximum (a case without q is a shape only)."""
    ragged = [c["seqlen"] for c in cases if c["seqlen"] % block]
    rises = [late_rise(c["q"], c["k"], block, c.get("causal", False)) for c in cases if "q" in c]
    best = max(rises, default=float("-inf"))
    missing = []
    if not ragged:
        missing.append(f"no case has a ragged last block of keys (seqlen % {block} != 0): "
                       f"seqlens {[c['seqlen'] for c in cases]}")
    if best < MIN_RISE:
        missing.append(f"no case's row max rises late enough: the largest rise of a row max at "
                       f"block >= {MIN_KV_BLOCKS - 1} is {best:.2f}, needs >= {MIN_RISE} "
                       f"({MIN_RISE - best:.2f} short; plant_late_max makes one)")
    what = (f"attention: ragged last block at seqlen {ragged or 'none'}, a late block raises a "
            f"row max by {best:.1f} (alpha = {math.exp(-best):.1e})")
    return _verdict(what, not missing, "; ".join(missing), short,
                    "the masked tail or a large late rescale is untested by these checks")


def kept_short(assertion: Any, *args: Any, reason: str) -> str:
    """`assertion(*args)` where the shape covers it, else its shortfall and `reason`: for a loop
    over cases of which some are kept short, all for one reason."""
    try:
        return assertion(*args)
    except CoverageError:
        return assertion(*args, short=reason)


def sim_seconds(chapter: str, pattern: str, directory: Any = None) -> str:
    """'143–212 s' (or '143 s'): the range of wall times of the newest CPU simulation of each
    check of `chapter` whose name matches the regex `pattern`, all tools together, as the
    committed records (results/*-numsim.json) hold them — the cost a shape kept small avoids.
    Raises CoverageError when no record matches."""
    import re

    from ..facts import results

    newest: dict[str, dict[str, Any]] = {}
    for c in results.cases(directory, simulated=True):
        if c["chapter"] == chapter and c["kind"] == "check" and re.search(pattern, c["name"]) \
                and c.get("seconds") is not None:
            newest[c["name"]] = c
    if not newest:
        raise CoverageError(f"no simulation of {chapter} matching /{pattern}/ is recorded")
    lo, hi = (round(f(c["seconds"] for c in newest.values())) for f in (min, max))
    return f"{lo} s" if lo == hi else f"{lo}–{hi} s"
