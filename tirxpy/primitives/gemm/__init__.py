"""gemm primitives: ``C (+)= A @ B`` on tensor cores, one file per instruction family.

- :mod:`.mma_sync`: ``Tx.warp.gemm`` -> ``mma.sync.m16n8k16`` (sm_80+; register fragments).
- :mod:`.wgmma`: ``Tx.wg.gemm_async`` / ``Tx.wg.gemm`` / ``Tx.wg.gemm_wait`` -> ``wgmma``
  (sm_90a; A from shared memory or registers, B from shared memory, C in registers).
- :mod:`.tcgen05`: ``Tx.gemm_async`` under ``T.elect_one()`` -> ``tcgen05.mma`` (sm_100a;
  C in tensor memory, cta_group 1 / 2, commit to an mbarrier, optionally multicast).

Legality (:mod:`.checks`) compares each operand's layout with the instruction's, element by
element, and names the first element whose owner differs. See docs/tutorial/05-gemm-primitives.md.
"""
from .. import op_specs  # noqa: F401  (gemm_wait's verifier rule)
from . import checks, desc, mma_sync, tcgen05, wgmma  # noqa: E402,F401  (registration side effects)
