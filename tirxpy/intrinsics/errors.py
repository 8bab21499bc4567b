"""Errors raised by the intrinsic table, user registration and matrix descriptors.

Every message says what is wrong and what to do about it::

    >>> from tirxpy.intrinsics import get
    >>> get("wgmma_fence").check_target("sm_80")
    Traceback (most recent call last):
    ...
    tirxpy.target.TargetError: wgmma.fence needs sm_90a; the kernel targets sm_80 — compile with arch='sm_90a'
"""

from tirxpy.errors import TirxError
from tirxpy.target import TargetError  # noqa: F401 - a target lacks an instruction (tirxpy.target owns the class)


class IntrinsicError(TirxError, ValueError):
    """Base class: an intrinsic is unknown, misused, or cannot be rendered."""


class OperandError(IntrinsicError):
    """An operand (or a shape parameter of a generated family) is invalid."""


class RegistrationError(IntrinsicError):
    """``register_intrinsic`` got an inconsistent definition or a name already taken."""


class DescriptorError(IntrinsicError):
    """A matrix descriptor field is out of range or misaligned."""


class OperandSpecError(RegistrationError, OperandError):
    """An operand definition is invalid (bad name, kind, dtype, access, count or values)."""
