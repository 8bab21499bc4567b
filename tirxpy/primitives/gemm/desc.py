"""Matrix descriptors as IR: the static part from the operand's layout, the start address at run time.

A descriptor's fields other than the start address (LBO, SBO, swizzle, version) are compile-time
facts of the layout (``tirxpy.intrinsics.descriptors.*_from_layout``). The start address is the
shared::cta address of the k-step's first element, known only at run time; the table entry
``gemm_smem_desc`` ORs its 14-bit field (``(addr & 0x3FFFF) >> 4``, bits 0-13;
``tirxpy.intrinsics.descriptors.START_ADDRESS_MASK``) into the static
descriptor built at address 0:

    >>> from tirxpy.intrinsics import get
    >>> get("gemm_smem_desc").render_call(["A_addr", "0x4000004000010000ull"])
    'tx_gemm_smem_desc(A_addr, 0x4000004000010000ull)'

``gemm_smem_desc_folded`` computes the same descriptor in C++ rather than in ``asm volatile``: the
start address comes in 16-byte units (operand kind ``smem_addr16``: the buffer's base ``>> 4`` plus
the element's offset) and is added to the static descriptor's low word, whose start-address field
is zero (a shared::cta address is below 2^18, so ``addr >> 4`` fills the 14-bit field without a
carry). The compiler then folds each k-step's constant offset into one add and shares the rest
across the calls: one uniform add and one move per operand descriptor instead of about five.
``Tx.wg.gemm_async(..., dispatch="wgmma_folded")`` selects it (:mod:`.wgmma`):

    >>> print(get("gemm_smem_desc_folded").render_helper())
    __device__ __forceinline__ unsigned long long tx_gemm_smem_desc_folded(unsigned addr, unsigned long long desc0) {
      return (unsigned long long)(((desc0 >> 32) << 32) | (unsigned)((unsigned)desc0 + addr));
    }
"""
from __future__ import annotations

from tirxpy.intrinsics import lookup, register_intrinsic
from tirxpy.intrinsics.descriptors import smem_desc, start_field_ptx
from tirxpy.ir import ops
from tirxpy.ir.expr import AddressOf

NAME = "gemm_smem_desc"

if lookup(NAME) is None:
    register_intrinsic(
        NAME,
        """{
        .reg .b64 tx_t;
        cvt.u64.u32 tx_t, {addr};
        """ + start_field_ptx("tx_t") + """
        or.b64 {desc}, {desc0}, tx_t;
        }""",
        [("desc", "reg", "uint64", "w"), ("addr", "smem_addr"), ("desc0", "reg", "uint64")],
        ret="desc", lowest="sm_90", memory=False, ptx="matrix descriptor start address",
        doc="desc0 with its start-address field (bits 0-13) set from the shared::cta address addr.")


FOLDED = "gemm_smem_desc_folded"

if lookup(FOLDED) is None:
    register_intrinsic(
        FOLDED,
        """{
        .reg .b32 tx_lo, tx_hi;
        mov.b64 {tx_lo, tx_hi}, {desc0};
        add.u32 tx_lo, tx_lo, {addr};
        mov.b64 {desc}, {tx_lo, tx_hi};
        }""",
        [("desc", "reg", "uint64", "w"), ("addr", "smem_addr16"), ("desc0", "reg", "uint64")],
        ret="desc", lowest="sm_90", memory=False, ptx="matrix descriptor start address",
        cxx="(({desc0} >> 32) << 32) | (unsigned)((unsigned){desc0} + {addr})",
        doc="desc0 (start-address field zero) with addr, a shared::cta address in 16-byte units, added to its low word.")


def static_desc(family: str, op) -> int:
    """The descriptor of checked operand ``op`` (:class:`~.checks.SmemOperand`) at address 0."""
    return smem_desc(family, op.layout, op.dtype, major=op.major, shape=op.shape)


def desc_at(ctx, desc0: int, element, folded: bool = False):
    """IR: the descriptor ``desc0`` started at ``element`` (a BufferLoad of shared memory):
    ``gemm_smem_desc(T.address_of(element), desc0)``, or with ``folded`` ``gemm_smem_desc_folded``."""
    return ctx.intrin(FOLDED if folded else NAME, AddressOf(element), ops.const(desc0, "uint64"))
