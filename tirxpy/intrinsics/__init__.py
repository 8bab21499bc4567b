"""tirxpy.intrinsics: the table of native instructions (PTX), user registration, matrix descriptors.

    >>> from tirxpy.intrinsics import get
    >>> e = get("mbarrier_try_wait_parity")
    >>> e.ptx, str(e.requirement), e.scope, e.ret_dtype
    ('mbarrier.try_wait.parity.shared::cta.b64', 'sm_90', 'thread', 'bool')
    >>> e.render_call(["bar", "phase"])
    'tx_mbarrier_try_wait_parity(bar, phase)'
"""
from . import barrier, cluster, cp_async, fence, ldst_matrix, mbarrier, misc, mma_sync, peer, tcgen05, tma, wgmma  # noqa: F401
from .entry import KINDS, SCOPES, Intrinsic, Operand
from .errors import DescriptorError, IntrinsicError, OperandError, RegistrationError, TargetError
from .register import register_intrinsic
from .render import PRELUDE, render_helpers
from .table import Family, entries, families, family, get, lookup, sync_ir_signatures
from .target import Arch, Requirement, parse_arch
from .tcgen05 import tcgen05_ld, tcgen05_st
from .wgmma import wgmma

__all__ = [
    "KINDS", "SCOPES", "Intrinsic", "Operand", "Family", "register_intrinsic", "get", "lookup", "entries", "families",
    "family", "sync_ir_signatures", "render_helpers", "PRELUDE", "Arch", "Requirement", "parse_arch",
    "IntrinsicError", "TargetError", "OperandError", "RegistrationError", "DescriptorError",
    "wgmma", "tcgen05_ld", "tcgen05_st",
]
