"""Entry points of the T namespace that live in the parser (kept apart to avoid import cycles)."""
from __future__ import annotations


def _decorating_frame_locals() -> dict:
    """Locals of the frame that applies the decorator calling this (names a kernel or macro uses
    only in annotations are not in its closure); empty at module level."""
    import sys

    frame = sys._getframe(2)
    outer = dict(frame.f_locals) if frame.f_code.co_name != "<module>" else {}
    del frame
    return outer


def prim_func(fn=None, *, verify: bool = True):
    """Decorator: parse the function's source into a :class:`~tirxpy.ir.kernel.Kernel`.

    ``@T.prim_func`` or ``@T.prim_func(verify=False)`` (skip the verifier).
    """
    from .parser import parse_function

    outer = _decorating_frame_locals()
    if fn is None:
        return lambda f: parse_function(f, verify=verify, outer=outer)
    return parse_function(fn, verify=verify, outer=outer)


def macro(fn):
    """Decorator: mark ``fn`` as a statement macro (see :mod:`tirxpy.ir.macro`)."""
    from .macro import Macro

    return Macro(fn, _decorating_frame_locals())


def parse_script(text: str, env: dict | None = None, verify: bool = True):
    """Parse tirxpy script text (as ``print(kernel)`` shows it) back into a Kernel.

    ``env`` adds names (e.g. custom layouts) to the script's namespace.
    """
    from .parser import parse_text

    return parse_text(text, env=env, verify=verify)
