"""The tile walk of the GEMM + reduce-scatter (:mod:`tirxpy_kernels.dist_rs_gemm`) and its copy-engine chunks.

Each shard's rows are tiled from the shard's first row (``tr = ceil(Ms / 128)`` tile rows per shard, so no
tile straddles two shards). Rank ``me`` walks ``2 tr`` tile rows: ``lag`` rows of the peer's shard, then blocks
of ``group`` rows alternating between the two shards, then the rest of its own (:func:`walk_row`). Both ranks
walk a shard's rows in the same order, so the peer computes each of this rank's tiles well before this rank
needs its partial. The copy engines move the peer's partials in chunks of whole tile rows (:func:`rs_chunks`).

    >>> shard_tile_rows(200, 2), rs_chunks(64, 8), chunk_shard_rows(200, 2, 4)
    (1, (8, 8), [(0, 100)])
"""
from __future__ import annotations

import numpy as np

from tirxpy import T
from tirxpy.lang.schedule import grouped_tile

from .errors import KernelConfigError, shown
from .gemm_plan import BM, GROUP, balanced_split
from .gemm_sm90 import tile_at

HALVES = 2          # consumer warpgroups of a tile, each counting its half in on a flag once per call


def shard_tile_rows(M: int, world: int) -> int:
    """Tile rows per shard, ``ceil((M / world) / 128)``: each shard's rows are tiled from its own first row."""
    return -(-(M // world) // BM)


def rs_lag(tr: int, cols: int, units: int, group: int = GROUP) -> int:
    """Walk rows of the peer's shard before the walk starts interleaving own rows (:func:`walk_row`): about three
    rounds of tiles (``3 units / cols`` rows), rounded up so that the ``tr - lag`` interleaved peer rows fill
    whole ``group``-row blocks; ``tr`` (peer rows first, then own rows) when the shard is too short to interleave.

        >>> rs_lag(64, 32, 132), rs_lag(32, 112, 132), rs_lag(8, 32, 132)
        (16, 4, 8)
    """
    want = -(-3 * units // cols)
    inter = max(0, (tr - want) // group * group)
    return tr - inter


def walk_row(w, tr, lag, group=GROUP):
    """``(own, row)`` of walk row ``w`` (of ``2 tr``): the peer's rows ``0 .. lag - 1`` first, then blocks of
    ``group`` rows alternating between the peer's next rows and this rank's first rows, then this rank's
    remaining rows. Each of this rank's rows comes at least ``lag + group`` walk rows after the peer walks the
    same shard row (both ranks walk alike), so the peer's partial of it is long pushed when it is needed, and
    the pushes spread over the whole walk instead of its first half. Works on ints and on device expressions.

        >>> [walk_row(w, 6, 2, 2) for w in range(12)]      # peer rows 0 1 | 2 3 own 0 1 | 4 5 own 2 3 | own 4 5
        [(False, 0), (False, 1), (False, 2), (False, 3), (True, 0), (True, 1), (False, 4), (False, 5),
         (True, 2), (True, 3), (True, 4), (True, 5)]
    """
    inter = tr - lag
    d = _max(w - lag, 0)
    q, r = d // group, d % group
    mid = _select(q % 2 < 1, lag + q // 2 * group + r, q // 2 * group + r)
    own = _select(w < lag, 0, _select(w < lag + 2 * inter, q % 2, 1)) >= 1     # (an expression's == compares trees)
    row = _select(w < lag, w, _select(w < lag + 2 * inter, mid, w - tr))
    return own, row


def rs_tile(P, t, me, tr, ms, lag):
    """``(a0, l0, n0, own, wide)`` of walk tile ``t``: ``a0`` its first row of ``A``, ``l0`` the same row in its
    shard (the row of ``OUT``), ``n0`` its first column, ``own`` whether the shard is rank ``me``'s, ``wide``
    whether it is ``BN`` columns wide (else a split's narrow tile). Walk rows map to shard rows by
    :func:`walk_row` (``lag`` peer rows first, then both interleaved). ``lag=None``: the halves walk, every tile
    of the peer's shard first (the GEMM's grouped order over its ``tr`` tile rows), then this rank's, so no band
    of the grouped order mixes the two shards; with the plan's ``split`` (:func:`rs_split`: its rows are peer
    rows ending at a band boundary) the GEMM's split walk over both shards' ``2 tr`` rows.

        >>> from tirxpy_kernels.dist_rs_gemm import rs_plan
        >>> P = rs_plan(512, 256, 64, BN=256, sms=2)     # Ms = 256: two tile rows per shard, one column
        >>> [rs_tile(P, t, 0, 2, 256, 2)[:4] for t in range(4)]      # rank 0: rank 1's rows, then its own
        [(256, 0, 0, False), (384, 128, 0, False), (0, 0, 0, True), (128, 128, 0, True)]
        >>> P = rs_plan(256, 512, 64, BN=256, sms=2)     # Ms = 128: one tile row per shard, two columns
        >>> [rs_tile(P, t, 1, 1, 128, None)[1:] for t in range(4)]
        [(0, 0, False, True), (0, 256, False, True), (0, 0, True, True), (0, 256, True, True)]
        >>> P = rs_plan(256, 512, 64, BN=256, sms=2, b_major="K", SPLIT=(1, 1, 240))    # peer row: 256 + 240 + 240
        >>> [rs_tile(P, t, 1, 1, 128, None)[2:] for t in range(5)]
        [(0, False, True), (256, False, False), (496, False, False), (0, True, True), (256, True, True)]
    """
    wide = True
    if lag is None and P.split is not None:
        m0, n0, wide = tile_at(P, t, 0)
        own = m0 >= tr * BM
        l0 = m0 - _select(own, tr * BM, 0)
    elif lag is None:
        half = tr * P.tile_cols
        own = t >= half
        tm, tn = grouped_tile(t - _select(own, half, 0), tr, P.tile_cols, P.group)
        l0, n0 = tm * BM, tn * P.BN
    else:
        m0, n0, _wide = tile_at(P, t, 0)
        own, row = walk_row(m0 // BM, tr, lag, P.group)
        l0 = row * BM
    a0 = _select(own, me * ms, (1 - me) * ms) + l0
    return a0, l0, n0, own, wide


def rs_split(M: int, N: int, K: int, BN: int, world: int = 2, sms: int = 132, group: int = GROUP):
    """The copy-engine walk's ``SPLIT`` (or None): the standalone GEMM's
    :func:`~tirxpy_kernels.gemm_plan.balanced_split` over the walk's ``world tr`` tile rows, its narrow tiles kept
    in the peer's rows (the first ``tr``, ending a multiple of ``group`` rows short of the own rows, so no band
    of the walk mixes the shards and own tiles, which reduce-add whole 64-column chunks, stay wide). ``K``: this
    rank's shard.

        >>> rs_split(8192, 8192, 14336, 256)        # 32 peer rows of 2 x 256 + 32 x 240: 2112 tiles, 16 rounds
        (32, 2, 240)
    """
    tr = shard_tile_rows(M, world)
    return balanced_split(world * tr * BM, N, K, BN, sms, group, rows_max=tr)


def rs_chunks(tr: int, chunks: int) -> tuple:
    """``(rows per chunk, number of chunks)``: the copy engines move a shard's partials in chunks of
    ``ceil(tr / chunks)`` whole tile rows (the last one shorter), so tile row ``t`` is in chunk ``t // rows``.

        >>> rs_chunks(64, 8), rs_chunks(10, 4), rs_chunks(1, 8)
        ((8, 8), (3, 4), (1, 1))
    """
    if type(chunks) is not int or chunks < 1:
        raise KernelConfigError(f"CHUNKS = {shown(chunks)} must be a positive int (copy-engine chunks per shard)")
    per = -(-tr // chunks)
    return per, -(-tr // per)


def chunk_shard_rows(M: int, world: int, chunks: int) -> list:
    """``[(r0, r1), ..]``: the shard rows of each chunk (:func:`rs_chunks`), the last one ending at ``Ms``."""
    ms, tr = M // world, shard_tile_rows(M, world)
    per, n = rs_chunks(tr, chunks)
    return [(c * per * BM, min((c + 1) * per * BM, ms)) for c in range(n)]


def chunk_halves(M: int, N: int, BN: int, world: int, chunks: int, split=None) -> list:
    """How many consumer halves the peer counts in on each chunk's flag per call: :data:`HALVES` per tile of the
    chunk's tile rows (``ceil(N / BN)`` tiles each, or ``wide + ceil((N - wide BN) / bn2)`` in the first
    ``rows`` of a ``split = (rows, wide, bn2)``).

        >>> chunk_halves(2048, 512, 256, 2, 4), chunk_halves(2048, 512, 256, 2, 4, (3, 1, 240))
        ([8, 8, 8, 8], [12, 10, 8, 8])
    """
    tr = shard_tile_rows(M, world)
    per, n = rs_chunks(tr, chunks)
    cols = -(-N // BN)
    rows, wide, bn2 = split or (0, 0, BN)
    split_cols = wide + -(-(N - wide * BN) // bn2)
    return [HALVES * sum(split_cols if r < rows else cols for r in range(c * per, min((c + 1) * per, tr)))
            for c in range(n)]


def _max(a, b):
    return max(a, b) if isinstance(a, int) else T.max(a, b)


def _select(cond, a, b):
    """``T.select`` on device expressions, plain Python on a Python bool (the walk evaluated on the host)."""
    if isinstance(cond, (bool, np.bool_)):
        return a if cond else b
    return T.select(cond, a, b)
