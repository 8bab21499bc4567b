"""Small kernels built on StageRing for the simulator: warp 0 produces rows of 32 floats through a ring of
``stages`` shared-memory stages (plain stores, every lane arrives on ``full``), warps 1 .. ``consumers`` each read
every row and write ``2 * x + 1`` of it to their own row of the output (every lane releases, so ``empty``
expects ``32 * consumers`` arrivals). The walk is ``tiles`` tiles of ``kt`` positions each, the ring carried
across tiles (position ``g = i * kt + k``), as in a persistent kernel.

Knobs break one rule each, for the misuse tests (the names say which)."""
from tirxpy import T
from tirxpy.lang import StageRing, setup_barriers

W = 32


def ring_copy(stages, tiles, kt, consumers=1, read_every=1, empty_arrivals=None, release_twice=False,
              skip_release=False, wrong_parity=False, skip_full_wait=False, producer_waits_full=False):
    """``read_every = r``: consumers use the data of positions ``g % r == 0`` only (they still wait and release
    every position) and write 0 for the others."""
    n = tiles * kt
    ec = 32 * consumers if empty_arrivals is None else empty_arrivals

    @T.prim_func
    def copy(A: T.Tensor((n * W,), "float32"), B: T.Tensor((consumers, n * W), "float32")):
        T.launch(grid=(1,), threads=32 * (1 + consumers))
        buf = T.alloc_shared((stages, W), "float32")
        full = T.alloc_shared((stages,), "uint64")
        empty = T.alloc_shared((stages,), "uint64")
        ring = StageRing(full, empty, stages)
        setup_barriers([(ring, 32, ec)], 1, False)
        w = T.warp_id()
        lane = T.lane_id()
        if w == 0:
            for i in T.serial(tiles):
                for k in T.serial(kt):
                    g = i * kt + k
                    if producer_waits_full:
                        ring.wait_full(g)
                    else:
                        ring.wait_empty(g)
                    buf[ring.stage(g), lane] = A[g * W + lane]
                    ring.arrive_full(g)
        else:
            for i in T.serial(tiles):
                for k in T.serial(kt):
                    g = i * kt + k
                    if wrong_parity:
                        T.ptx.mbarrier_wait_parity(full[ring.stage(g)], 1 - ring.parity(g))
                    elif skip_full_wait:
                        if g % 2 == 0:
                            ring.wait_full(g)
                    else:
                        ring.wait_full(g)
                    if g % read_every == 0:
                        B[w - 1, g * W + lane] = buf[ring.stage(g), lane] * T.float32(2) + T.float32(1)
                    else:
                        B[w - 1, g * W + lane] = T.float32(0)
                    if not skip_release:
                        ring.release(g)
                    if release_twice:
                        ring.release(g)
    return copy


def expected(a, consumers, read_every=1):
    """What :func:`ring_copy` writes: ``2 a + 1`` at the rows it reads, 0 at the others, for every consumer."""
    import numpy as np

    rows = (2 * a + 1).reshape(-1, W)
    rows[np.arange(rows.shape[0]) % read_every != 0] = 0
    return np.broadcast_to(rows.reshape(-1), (consumers, a.size))
