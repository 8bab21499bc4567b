"""The FP8 parts of the Hopper GEMM's plan (:mod:`tirxpy_kernels.gemm_plan`): the input formats, the scalings
and the block scaling's k-loop shape (parts, scratch accumulators, passes). Plain Python on ints.

    >>> block_part(128), part_buffers(128, 128), check_pass("block", 128, 128, 64)
    (128, 2, 64)
"""
from __future__ import annotations

from tirxpy.lang.schedule import cdiv, persistent_units

from .errors import KernelConfigError, flag_option, int_option, shown

FP8_DTYPES = ("float8_e4m3", "float8_e5m2")
# how an FP8 product is scaled (gemm_sm90's ``scaling``): one scale per tensor, per row of A and column of
# B, or per 1 x 128 group of A along K and 128 x 128 block of B (promoted into the float32 accumulator
# every k-block); 16-bit inputs take none
SCALINGS = (None, "tensor", "row", "block")
BLOCK_SCALE = 128      # the K (and B's N) extent of one block scale
WHOLE_PART_MAX = 192   # the widest whole-tile part: its scratch and the tile's accumulator, BN / 2 registers each


def scale_bytes(BM, scaling):
    """Bytes of block scales landing in each stage next to the operands: A's ``BM`` row scales
    (``scaling="block"``), else none.

        >>> scale_bytes(128, "block"), scale_bytes(128, "row")
        (512, 0)
    """
    return BM * 4 if scaling == "block" else 0


def block_part(BN, PART=None):
    """The width of one part of a block-scaled tile's per-k-block product (``scaling="block"``): each
    k-block's wgmma runs ``BN / PART`` column parts, each into a scratch accumulator of ``PART`` columns
    that is promoted (times its scales) into the float32 tile. ``BN`` is a multiple of 64; ``PART`` is 64 or
    128 dividing both ``BN`` and 128 (a part inside one 128-column block of B's scales), or ``BN`` itself up to
    192 (one whole-tile part, promoted segment by segment: :attr:`~tirxpy_kernels.gemm_plan.GemmPlan.scale_cols`).
    Default: 128 for ``BN = 128`` (one part, k-blocks in pairs), ``BN`` for 192, else 64.

        >>> block_part(256), block_part(128), block_part(192, 64), block_part(192)
        (64, 128, 64, 192)
        >>> block_part(256, 256)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: gemm_sm90: PART = 256 must divide both BN = 256 and 128 (a part of a block-scaled tile lies inside one 128-column block scale of B) and be at least 64, or be BN up to 192 (one whole-tile part): use PART = 128 or 64
    """
    BN = int_option("gemm_sm90", "BN", BN)
    if BN % 64:
        raise KernelConfigError(f"gemm_sm90: scaling='block' takes BN = 64, 128, 192 or 256 (whole 64-column parts), "
                                f"got BN = {BN}")
    if PART is None:
        return BN if BN in (BLOCK_SCALE, 192) else 64
    if not (type(PART) is int and ((PART in (64, 128) and BN % PART == 0) or PART == BN <= WHOLE_PART_MAX)):
        fits = [p for p in (128, 64) if BN % p == 0]
        if BN <= WHOLE_PART_MAX and BN not in fits:
            fits.insert(0, BN)
        raise KernelConfigError(f"gemm_sm90: PART = {shown(PART, 40)} must divide both BN = {BN} and {BLOCK_SCALE} "
                                "(a part of a "
                                f"block-scaled tile lies inside one {BLOCK_SCALE}-column block scale of B) and be at least 64, "
                                f"or be BN up to {WHOLE_PART_MAX} (one whole-tile part): use PART = "
                                + " or ".join(str(p) for p in fits))
    return PART


def part_buffers(BN, PART):
    """Scratch accumulators of a block-scaled tile: two (a part's wgmma runs while the previous part is
    promoted) when the tile's ``BN / 2`` accumulator registers per thread and two parts' ``PART / 2`` each fit in
    192, else one (wgmma, wait, promote, part after part).

        >>> part_buffers(256, 64), part_buffers(256, 128), part_buffers(128, 128)
        (2, 1, 2)
    """
    return 2 if BN // 2 + PART <= 192 else 1


PASS_MAX = 64          # the most k-blocks one (unrolled) pass of the block-scaled k-loop takes


def default_pass(PART, BN, k_blocks):
    """The block scaling's default k-blocks per pass (:func:`check_pass`). A tile of one part over two scratch
    accumulators (``BN = 128``: a k-block's wgmma runs while the previous one is promoted, which each pass's drain
    interrupts): the whole k-loop as one pass up to :data:`PASS_MAX` k-blocks, so that the wgmma pipeline drains
    only at the tile's end, and longer k-loops in passes of 32 (the unrolled code stays under 64 k-blocks, the
    remainder pass included). A tile of one part over one scratch accumulator (192: each k-block waited for before
    its promotion anyway): 16. Several parts: 2.

        >>> default_pass(128, 128, 56), default_pass(128, 128, 64), default_pass(128, 128, 128)
        (56, 64, 32)
        >>> default_pass(192, 192, 56), default_pass(64, 256, 56)
        (16, 2)
    """
    if PART != BN:
        return 2
    if part_buffers(BN, PART) == 1:
        return 16
    return k_blocks if k_blocks <= PASS_MAX else PASS_MAX // 2


def check_pass(scaling, BN, PART, k_blocks, PASS=None):
    """The block scaling's k-blocks per pass of the k-loop, resolved: an int ``PASS`` in [1, :data:`PASS_MAX`]
    (each pass is unrolled) for a tile's ``k_blocks`` k-blocks. Within a pass each part's wgmma runs while the
    previous part is promoted (with two scratch accumulators), and a pass ends with every wgmma waited for.
    Default: :func:`default_pass`. Other scalings take none (None).

        >>> check_pass("block", 128, 128, 56), check_pass("block", 256, 64, 56), check_pass("block", 192, 192, 56, 3)
        (56, 2, 3)
        >>> check_pass("block", 128, 128, 56, 65)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: gemm_sm90: PASS = 65 must be an int in [1, 64] (k-blocks per pass of the block-scaled k-loop, each pass unrolled)
    """
    if not (type(scaling) is str and scaling == "block"):
        if PASS is not None:
            raise KernelConfigError(f"gemm_sm90: PASS = {shown(PASS, 40)} applies to scaling='block' only: leave it "
                                    "unset")
        return None
    if PASS is None:
        for name, v in (("BN", BN), ("PART", PART), ("k_blocks", k_blocks)):
            int_option("gemm_sm90", name, v, lo=1)
        return default_pass(int(PART), int(BN), int(k_blocks))
    if not (type(PASS) is int and 1 <= PASS <= PASS_MAX):
        raise KernelConfigError(f"gemm_sm90: PASS = {shown(PASS, 40)} must be an int in [1, {PASS_MAX}] (k-blocks per "
                                "pass of the block-scaled k-loop, each pass unrolled)")
    return PASS


# The block-scaled tile widths gemm_fp8 chooses from, each as one part: 128 over two scratch accumulators (a
# k-block's wgmma runs while the previous one is promoted) and 192 over one (the other consumer's wgmma runs
# while it is promoted), with the 192-wide tile's throughput per column relative to the 128-wide one's; and the
# exposed time per tile (epilogue, pipeline turn) in k-blocks of a 128-wide tile. The rule they encode: 192 where
# its fewer tiles fill the persistent grid's rounds better (N = 2112, 24576 x 1536), 128 elsewhere. Fitted to
# same-process runs on the H100 (docs/performance.md).
_BLOCK_EFFICIENCY = {128: 1.0, 192: 0.95}
_BLOCK_TILE_OVERHEAD = 4.7


def block_tile_cost(M, N, K, BN, sms):
    """Estimated time of the block-scaled persistent schedule at tile width ``BN`` (128 or 192), in 128-wide
    tiles' k-blocks: rounds (``ceil(tiles / CTAs)``) times a tile's k-blocks times ``BN / 128`` over the width's
    efficiency, plus the per-tile overhead.

        >>> round(block_tile_cost(4096, 2112, 7168, 128, 132)), round(block_tile_cost(4096, 2112, 7168, 192, 132))
        (304, 279)
    """
    tiles = cdiv(M, 128) * cdiv(N, BN)
    rounds = cdiv(tiles, persistent_units(tiles, sms, 1))
    return rounds * (cdiv(K, BLOCK_SCALE) * BN / BLOCK_SCALE / _BLOCK_EFFICIENCY[BN] + _BLOCK_TILE_OVERHEAD)


def choose_block_tile(M, N, K, sms):
    """The block scaling's tile width with the least :func:`block_tile_cost` (the narrower one on a tie).

        >>> choose_block_tile(8192, 8192, 8192, 132), choose_block_tile(4096, 2112, 7168, 132)
        (128, 192)
    """
    return min(_BLOCK_EFFICIENCY, key=lambda bn: (block_tile_cost(M, N, K, bn, sms), bn))


def check_scaling(dtype, scaling, a_major="K", b_major="K", BN=256, CM=1, PINGPONG=False, SPLIT=None, PART=None):
    """How an FP8 product is scaled, checked against the inputs and the schedule: FP8 inputs take one of
    ``"tensor"``, ``"row"``, ``"block"`` and both operands K-major (FP8 wgmma reads no transposed operand);
    16-bit inputs take none. ``"block"`` runs the cooperative schedule without a cluster, a split or
    ``DEFER``, in parts of :func:`block_part` columns; ``PART`` applies to it alone.

        >>> check_scaling("float8_e4m3", "block", BN=256, PART=64)
        >>> check_scaling("float8_e4m3", "tensor", BN=256, PART=64)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: gemm_sm90: PART = 64 applies to scaling='block' only (got scaling='tensor'): leave PART unset
    """
    if not any(type(scaling) is type(x) and scaling == x for x in SCALINGS):
        raise KernelConfigError(f"gemm_sm90: scaling must be one of {SCALINGS}, got {shown(scaling, 60)}")
    if type(dtype) is not str:
        raise KernelConfigError(f"gemm_sm90: dtype (the inputs') must be a str, got {shown(dtype, 60)}")
    if dtype in FP8_DTYPES:
        if scaling is None:
            raise KernelConfigError(f"gemm_sm90: {dtype} inputs need a scaling: 'tensor', 'row' or 'block'")
        if not (type(a_major) is str and a_major == "K" and type(b_major) is str and b_major == "K"):
            raise KernelConfigError(f"gemm_sm90: FP8 wgmma reads both operands K-major; got a_major={shown(a_major)}, "
                                    f"b_major={shown(b_major)} (pass A as (M, K) row-major and B as (N, K) row-major)")
    elif scaling is not None:
        raise KernelConfigError(f"gemm_sm90: scaling={shown(scaling)} applies to FP8 inputs {FP8_DTYPES}, not {dtype}")
    if scaling != "block":
        if PART is not None:
            raise KernelConfigError(f"gemm_sm90: PART = {shown(PART, 40)} applies to scaling='block' only (got "
                                    f"scaling={shown(scaling)}): leave PART unset")
        return
    PINGPONG, CM = flag_option("gemm_sm90", "PINGPONG", PINGPONG), int_option("gemm_sm90", "CM", CM)
    if PINGPONG or CM != 1 or SPLIT is not None:
        raise KernelConfigError("gemm_sm90: scaling='block' runs the cooperative schedule without a cluster or a "
                                f"split (PINGPONG=False, CM=1, SPLIT=None); got PINGPONG={shown(PINGPONG, 60)}, "
                                f"CM={shown(CM, 60)}, "
                                f"SPLIT={shown(SPLIT, 60)}")
    block_part(BN, PART)
