"""Plan of the Blackwell GEMM (:mod:`tirxpy_kernels.gemm_sm100`): tile choice, ring depth, TMEM and shared-memory
budgets, the checks of every option, and the host-side packing of block scales.

The rules the defaults follow:

- ``BN`` (tile columns; tiles are ``128 cta_group`` rows): 256, the widest ``tcgen05.mma`` N, which
  halves how often A is read against a 128-wide tile; 128 for block-scaled fp8, where tensor memory
  must also hold the staged scales next to two accumulators.
- ``STAGES`` (depth of the shared-memory ring): the deepest ring that fits the shared memory per CTA
  (and, block-scaled, the 512 TMEM columns), so the TMA producer runs as far ahead of the tensor cores
  as the SM allows.
- ``BK`` is not a choice: one k-block spans the 128-byte swizzle atom (64 bf16 / f16, 128 fp8).
- ``EPI`` (columns per epilogue chunk): 32, one ``tcgen05.ld.32x32b.x32`` per thread into 32 registers
  and a double-buffered 2 x 16 KiB staging tile; 16 halves the staging tile, which frees 16 KiB for a
  deeper ring where one more stage is what does not fit.
- ``cta_group``: 1 (one CTA per 128-row tile); 2 runs CTA pairs on 256-row tiles, each SM loading half
  of B, for problems large enough that the feed from L2 bounds the single-CTA tile
  (docs/performance.md has the arithmetic).
- ``ctas``: the persistent grid, one CTA per SM (the target's count, a B200's 148, by default; fewer when there
  are fewer tiles).

    >>> p = plan(8192, 8192, 8192)
    >>> p.BN, p.STAGES, p.BK, p.tiles, p.grid, p.tmem_cols
    (256, 4, 64, 2048, 148, 512)
    >>> plan(8192, 8192, 8192, cta_group=2).STAGES, plan(8192, 8192, 8192, dtype="float8_e4m3").STAGES
    (6, 5)
"""
from __future__ import annotations

from dataclasses import dataclass

from tirxpy.ir.dtype import DataType
from tirxpy.lang import cdiv, persistent_units
from tirxpy.target import as_target

from .errors import KernelConfigError, is_int, shown

#: The target the Blackwell GEMM is built for: a plan fits its shared memory per CTA and tensor-memory
#: columns, and its SM count is the default persistent grid.
TARGET = as_target("sm_100a")
FP8 = ("float8_e4m3", "float8_e5m2")
DTYPES = ("bfloat16", "float16") + FP8


@dataclass(frozen=True)
class Plan:
    """A checked configuration of :func:`tirxpy_kernels.gemm_sm100.gemm_sm100` and the counts derived from it."""

    M: int
    N: int
    K: int
    BN: int          # tile columns
    STAGES: int      # shared-memory ring depth
    EPI: int         # epilogue chunk columns
    cta_group: int   # CTAs per tile (1 or 2)
    dtype: str       # input type
    ctas: int        # CTAs the persistent grid may use

    @property
    def scaled(self) -> bool:
        """Block-scaled MXFP8 (``kind::mxf8f6f4.block_scale``)."""
        return self.dtype in FP8

    @property
    def BM(self) -> int:
        """Tile rows: 128 per CTA of the group."""
        return 128 * self.cta_group

    @property
    def BK(self) -> int:
        """K-block: one 128-byte swizzle atom of elements."""
        return 128 // self.itemsize

    @property
    def itemsize(self) -> int:
        """Bytes per input element: 1 for the fp8 types, 2 for bf16 / f16."""
        return DataType.get(self.dtype).itemsize

    @property
    def BNc(self) -> int:
        """Rows of B (columns of C) each CTA of the group loads per stage."""
        return self.BN // self.cta_group

    @property
    def mt(self) -> int:
        return cdiv(self.M, self.BM)

    @property
    def nt(self) -> int:
        return cdiv(self.N, self.BN)

    @property
    def tiles(self) -> int:
        return self.mt * self.nt

    @property
    def KB(self) -> int:
        """K-blocks per tile."""
        return cdiv(self.K, self.BK)

    @property
    def KBs(self) -> int:
        """128-element k-blocks of the packed scale tensors (block-scaled only; equal to ``KB`` there)."""
        return cdiv(self.K, 128)

    @property
    def clusters(self) -> int:
        """Persistent units (CTAs, or CTA pairs with ``cta_group=2``) the grid launches."""
        return persistent_units(self.tiles, self.ctas, self.cta_group)

    @property
    def grid(self) -> int:
        return self.clusters * self.cta_group

    @property
    def per_cta(self) -> int:
        """Most tiles one unit takes."""
        return cdiv(self.tiles, self.clusters)

    @property
    def sf_col(self) -> int:
        """First TMEM column of the staged scales: after the two ``BN``-column accumulators."""
        return 2 * self.BN

    @property
    def tmem_used(self) -> int:
        """TMEM columns in use: two accumulators, and per stage 4 + 4 scale-word columns when block-scaled."""
        return 2 * self.BN + (8 * self.STAGES if self.scaled else 0)

    @property
    def tmem_cols(self) -> int:
        """TMEM columns allocated: ``tmem_used`` rounded up to a power of two, at least 32."""
        n = 32
        while n < self.tmem_used:
            n *= 2
        return n

    @property
    def stage_bytes(self) -> int:
        """Shared memory of one ring stage: 128 rows of A, ``BNc`` rows of B, the two 512-byte scale tiles."""
        return (128 + self.BNc) * self.BK * self.itemsize + (1024 if self.scaled else 0)

    @property
    def smem(self) -> int:
        """Shared memory in all: the ring, the double-buffered ``(128, EPI)`` f32 staging tile, 1 KiB for
        barriers and alignment."""
        return self.STAGES * self.stage_bytes + 2 * 128 * self.EPI * 4 + 1024


def _check_shape(M, N, K, BN, EPI, cta_group, dtype):
    for name, v in (("M", M), ("N", N), ("K", K), ("BN", BN), ("EPI", EPI)):
        if not is_int(v):
            raise KernelConfigError(f"gemm_sm100: {name} must be an int, got {shown(v)} ({type(v).__name__})")
    if type(dtype) is not str or dtype not in DTYPES:
        raise KernelConfigError("gemm_sm100: dtype (the inputs') must be bfloat16 or float16 (kind::f16) or "
                                f"float8_e4m3 / float8_e5m2 (block-scaled kind::mxf8f6f4), got {shown(dtype)}")
    if type(cta_group) is not int or cta_group not in (1, 2):
        raise KernelConfigError(f"gemm_sm100: cta_group must be 1 or 2, got {shown(cta_group)}")
    if dtype in FP8 and (cta_group != 1 or BN not in (32, 64, 128)):
        raise KernelConfigError(f"gemm_sm100: block-scaled fp8 runs with cta_group=1 and BN in (32, 64, 128) (one 128-row "
                                f"scale tile of B per k-block, TMEM for two accumulators and the staged scales); got "
                                f"cta_group={cta_group}, BN={BN}")
    step = 16 * cta_group
    if not (step <= BN <= 256 and BN % step == 0):
        raise KernelConfigError(f"gemm_sm100: BN = {shown(BN, 60)} must be a multiple of {step} in [{step}, "
                                f"256] for cta_group={cta_group}"
                                " (tcgen05.mma N, split over the pair for cta_group=2)")
    if EPI < 4 or EPI > 128 or EPI & (EPI - 1) or BN % EPI:
        raise KernelConfigError(f"gemm_sm100: EPI = {EPI} (epilogue chunk columns) must be a power of two <= 128 dividing "
                                f"BN = {BN}, at least 4")
    if min(M, N, K) <= 0:
        raise KernelConfigError(f"gemm_sm100: M, N, K must be positive, got {shown((M, N, K))}")
    if (K * DataType.get(dtype).itemsize) % 16 or (N * 4) % 16:
        raise KernelConfigError(f"gemm_sm100: TMA needs 16-byte row pitches: K = {K} ({dtype}) and N = {N} (float32 C) "
                                "must be multiples of 8 and 4")


def _fits(p: Plan) -> bool:
    return p.smem <= TARGET.smem_per_cta and p.tmem_used <= TARGET.tmem_columns


def plan(M, N, K, BN=None, STAGES=None, EPI=32, ctas=TARGET.sm_count, cta_group=1, dtype="bfloat16") -> Plan:
    """The checked :class:`Plan` (``BN`` / ``STAGES`` ``None``: the module docstring's defaults)."""
    if BN is None:
        BN = 128 if type(dtype) is str and dtype in FP8 else 256
    _check_shape(M, N, K, BN, EPI, cta_group, dtype)
    if type(ctas) is not int or ctas < 1:
        raise KernelConfigError(f"gemm_sm100: ctas = {shown(ctas)} must be an int >= 1 (the SMs the persistent grid "
                                "may use)")
    if STAGES is None:
        STAGES = 1
        while _fits(Plan(M, N, K, BN, STAGES + 1, EPI, cta_group, dtype, ctas)):
            STAGES += 1
    elif type(STAGES) is not int or STAGES < 1:
        raise KernelConfigError(f"gemm_sm100: STAGES = {shown(STAGES)} must be an int >= 1 (or None: the deepest ring "
                                "that fits)")
    p = Plan(M, N, K, BN, STAGES, EPI, cta_group, dtype, ctas)
    if p.tmem_used > TARGET.tmem_columns:
        raise KernelConfigError(f"gemm_sm100: {p.tmem_used} TMEM columns (2 x BN = {2 * BN} + 8 x STAGES = {8 * STAGES} for the "
                                f"scales) exceed {TARGET.tmem_columns}; use fewer stages")
    if p.smem > TARGET.smem_per_cta:
        raise KernelConfigError(f"gemm_sm100: {shown(p.smem, 60)} bytes of shared memory (STAGES = "
                                f"{shown(STAGES, 60)}, BN = {shown(BN, 60)}) exceed the "
                                f"{TARGET.smem_per_cta}-byte {TARGET} limit; use fewer stages")
    return p


def scale_rows(rows, K):
    """Rows of the packed scale tensor for a ``(rows, K)`` operand: one (32, 4) uint32 tile per
    128 rows and 128 elements of K."""
    return cdiv(rows, 128) * cdiv(K, 128) * 32


def pack_scales(sf):
    """Host side: ue8m0 scales ``sf[r, c]`` (uint8; scales elements ``32 c .. 32 c + 31`` of row
    ``r``) -> the ``(scale_rows, 4)`` uint32 tensor the kernel loads: for 128-row block ``rb`` and
    k-block ``kb``, row ``(rb * KB + kb) * 32 + t`` holds in word ``j`` the bytes ``c = 0..3`` of
    row ``rb * 128 + 32 j + t``, chunk ``4 kb + c`` (the 128 x 4 scale tile of cuBLAS's block-scaled
    layout). Padding is 127 (scale 1)."""
    import numpy as np  # noqa: PLC0415 - host helper only

    sf = np.asarray(sf, np.uint8)
    rows, chunks = sf.shape
    RB, KB = cdiv(rows, 128), cdiv(chunks, 4)
    pad = np.full((RB * 128, KB * 4), 127, np.uint8)
    pad[:rows, :chunks] = sf
    t = pad.reshape(RB, 4, 32, KB, 4)  # rb, j, t, kb, c
    return np.ascontiguousarray(t.transpose(0, 3, 2, 1, 4)).reshape(RB * KB * 32, 16).view(np.uint32)
