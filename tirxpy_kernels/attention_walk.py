"""The tile walks of the Hopper attention kernel (:mod:`tirxpy_kernels.attention_sm90`): which query tile,
head and batch each step of a CTA takes (one tile per CTA, persistent, persistent causal in pairs of
query tiles, and the causal tail dealt tile by tile), and how many key blocks a tile reads. The
functions return Python ints or device expressions (``tirxpy.T``), for use inside the kernel body.

    >>> causal_tail(8, 16, 32, 132)[1]      # S = 1k causal, 32 x 16 heads: 50 tiles of each index dealt
    50
"""
from __future__ import annotations

from tirxpy import T

from tirxpy.lang.schedule import tiles_of_unit


def causal_tail(MT, H, B, units):
    """``(S0, n)`` of the persistent causal walk with ``TAIL``: pairs ``0 .. S0 - 1`` of query tiles go round
    robin as pairs (CTA ``u`` takes pairs ``u, u + units, ...``), and the ``n * NP`` pairs from ``S0`` on, the
    last one to two rounds' worth, are dealt as single tiles heaviest first, ``NP = ceil(MT / 2)``.
    ``S0`` is a multiple of ``NP``, so every query tile index appears ``n`` times in the tail.

        >>> causal_tail(8, 16, 32, 132)       # 2048 pairs: 14 rounds of pairs, 200 pairs (800 tiles) dealt
        (1848, 50)
    """
    NP = -(-MT // 2)
    P = NP * H * B
    S0 = max(0, P // units - 1) * units // NP * NP
    return S0, (P - S0) // NP


def causal_steps(MT, H, B, units, tail):
    """Steps of CTA ``T.cta_id(0)``'s persistent causal walk (a device expression): two per pair, and with
    ``tail`` the pairs before :func:`causal_tail`'s ``S0`` in pairs plus its share of the ``MT * n`` dealt tiles
    (rank ``r`` of round ``s`` goes to CTA ``r % units``, or ``units - 1 - r % units`` in odd rounds)."""
    NP = -(-MT // 2)
    u = T.cta_id(0)
    if not tail:
        return tiles_of_unit(u, units, NP * H * B) * 2
    S0, n = causal_tail(MT, H, B, units)
    NT = MT * n
    full, rem = NT // units, NT % units
    pos = u if full % 2 == 0 else units - 1 - u
    return tiles_of_unit(u, units, S0) * 2 + full + T.cast(pos < rem, "int32")


def tile_of(t, persist, units, MT, H, causal, B=1, tail=False):
    """``(query tile, head, batch, valid)`` of step ``t`` of this CTA's walk; Python ints or device
    expressions. One tile per CTA: the CTA's grid position. Persistent: tile ``cta + t * units`` of
    the ``(MT, H, B)`` tiles (query tile fastest). Persistent and causal: the walk takes pairs of
    query tiles ``(MT - 1 - j, j)`` of one head, ``j < ceil(MT / 2)`` -- pair ``cta + (t / 2) *
    units``, heavy tile first -- so that every pair holds about the same number of key blocks and
    CTAs stay balanced; when ``MT`` is odd the middle pair has one tile (``valid`` is false for its
    second step). With ``tail`` (``TAIL``) the last pairs are dealt as single tiles instead, heaviest
    first, in rounds that alternate direction over the CTAs (:func:`causal_tail`, :func:`causal_steps`):
    the pairs are all the same size, so when they do not divide into the CTAs their last round left the
    others idle. Causal query tiles otherwise run from the last (heaviest) down."""
    if persist and causal:
        NP = -(-MT // 2)
        u = T.cta_id(0)
        pair = u + (t // 2) * units
        if tail:
            S0, n = causal_tail(MT, H, B, units)
            paired = tiles_of_unit(u, units, S0) * 2        # this CTA's steps before the dealt tail
            head = t < paired
            ts = t - paired
            r = ts * units + T.select(ts % 2 < 1, u, units - 1 - u)
            mtt = MT - 1 - r // n                           # rank r: query tile mtt, its (r % n)-th pair
            pair = T.select(head, pair, S0 + (r % n) * NP + T.min(mtt, MT - 1 - mtt))
        j, h, b = pair % NP, (pair // NP) % H, pair // (NP * H)
        mt = T.select(t % 2 < 1, MT - 1 - j, j)      # (`<`, not `==`: plain Python here, not the parser)
        valid = True if MT % 2 == 0 else (1 - t % 2) + (MT - 1 - 2 * j) > 0
        if tail:
            mt = T.select(head, mt, mtt)
            valid = True if MT % 2 == 0 else T.select(head, (1 - t % 2) + (MT - 1 - 2 * j), 1) > 0
        return mt, h, b, valid
    if persist:
        lin = T.cta_id(0) + t * units
        mt, h, b = lin % MT, (lin // MT) % H, lin // (MT * H)
    else:
        mt, h, b = T.cta_id(0), T.cta_id(1), T.cta_id(2)
    return (MT - 1 - mt if causal else mt), h, b, True


def key_blocks(m0, NKV, BM, BN, SQ, causal):
    """Key blocks a query tile at row ``m0`` reads: all ``NKV``, or up to the diagonal when causal."""
    return T.min(NKV, T.ceildiv(T.min(m0 + BM, SQ), BN)) if causal else NKV


def tile_blocks(p, m0, rows, seq=None):
    """Key blocks the query rows ``m0 .. m0 + rows - 1`` of a tile read (:func:`key_blocks`): of the plan's one
    problem (``seq`` None), or of a packed sequence ``seq = (q0, lq, k0, lk)`` (its query / key start and length,
    device expressions read from ``cu_seqlens``; :func:`sequence`).

        >>> from tirxpy_kernels.attention_plan import plan
        >>> tile_blocks(plan(1, 2, 2, 1000, 1000, 64, BN=64), 0, 128)      # ceil(1000 / 64)
        16
    """
    if seq is None:
        return key_blocks(m0, p.kv_blocks, rows, p.BN, p.SQ, p.causal)
    return key_blocks(m0, T.ceildiv(seq[3], p.BN), rows, p.BN, seq[1], p.causal)


EMPTY_TILE = 1 << 20
"""The query tile an empty place of a VARLEN tile map names: past the end of any sequence (rows ``2^27`` on)."""


def varlen_slots(SQT, BM, B, per=1):
    """Slots of a VARLEN grid's tile map: at least the query tiles of ``B`` sequences of ``SQT`` packed rows in all
    (each sequence adds at most one partial tile), or with ``per = 2`` (pairs of a sequence's tiles, a lone middle
    one in its own slot) at least half of them plus one per sequence.

        >>> varlen_slots(500, 128, 3), varlen_slots(500, 128, 3, 2)
        (7, 5)
    """
    tiles = -(-SQT // BM) + B
    return tiles if per == 1 else (tiles + B + 1) // 2


def varlen_tile(H, MAP, t=0):
    """``(query tile, head, sequence)`` of step ``t`` of this CTA of a VARLEN grid: CTA ``x`` takes head ``x % H`` of
    slot ``x / H`` of the tile map ``MAP`` (``MAP[0, s]``: its sequence, ``MAP[1 + t, s]``: its ``t``-th query tile;
    an empty place names tile :data:`EMPTY_TILE`, past the sequence's end). Heads are fastest, so the CTAs start the
    map's tiles in its order (:func:`tirxpy_kernels.attention_varlen_api.tile_map`: most work first)."""
    x = T.cta_id(0)
    return MAP[1 + t, x // H], x % H, MAP[0, x // H]


def sequence(cu_q, cu_k, b, p, SQT, SKT):
    """``(q0, lq, k0, lk)``: the query rows ``q0 .. q0 + lq - 1`` and key rows ``k0 .. k0 + lk - 1`` of packed
    sequence ``b`` (device expressions over loads of the ``cu_seqlens`` tensors ``cu_q`` / ``cu_k``; the kernel
    binds each once), clamped so that whatever the offsets hold the rows lie in the ``SQT`` / ``SKT`` packed rows and
    the lengths in ``[0, p.SQ]`` / ``[0, p.SK]``, the window the kernel is built for: right offsets pass unchanged,
    and bad ones (which the host check refuses) give rows that keep every access inside its tensor and a walk of
    at most the window's blocks. Python ints give ints:

        >>> from tirxpy_kernels.attention_plan import plan
        >>> p = plan(1, 2, 2, 384, 384, 64, VARLEN=True)          # a window of 384 rows
        >>> sequence([0, 300], [0, 200], 0, p, 1000, 1000), sequence([-2 ** 30, 4], [0, 2 ** 30], 0, p, 1000, 1000)
        ((0, 300, 0, 200), (0, 4, 0, 384))
        >>> sequence([990, 1200], [5, 2], 0, p, 1000, 1000)      # past the packed rows; a negative length
        (990, 10, 5, 0)
    """
    return clamped_rows(cu_q, b, p.SQ, SQT) + clamped_rows(cu_k, b, p.SK, SKT)


def clamped_rows(cu, b, window, total):
    """``(start, length)`` of sequence ``b`` of the offsets ``cu`` over ``total`` packed rows: the start clamped to
    ``[0, total]``, the length to ``[0, window]`` and to the rows left (:func:`sequence`).

        >>> clamped_rows([0, 300, 2 ** 31 - 1], 1, 384, 1000)
        (300, 384)
    """
    start = T.min(T.max(cu[b], 0), total)
    return start, T.min(T.max(cu[b + 1] - start, 0), T.min(window, total - start))


def next_step(t, units, MT, H, causal, B=1, tail=False):
    """The step after ``t`` of a persistent CTA's walk that holds a tile: ``t + 1``, or ``t + 2`` when
    ``t + 1`` is the missing second tile of a causal walk's lone middle pair (odd ``MT``)."""
    if causal and MT % 2:
        return T.select(tile_of(t + 1, True, units, MT, H, causal, B, tail)[3], t + 1, t + 2)
    return t + 1
