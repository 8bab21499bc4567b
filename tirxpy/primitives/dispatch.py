"""The dispatcher: implementations registered per primitive, tried by priority, with reasons.

API (DESIGN.md section 4)
-------------------------
``register_impl(op, target="sm_80", *, variant, priority=0, when=(), doc="", kwargs=None)``
    Decorator for ``fn(ctx) -> Stmt``. ``op`` is the primitive name (``"copy"``, ``"gemm"``, or a
    new one: it is registered with the verifier's op-spec registry when unknown). ``target`` is
    the lowest target the implementation emits for (``"sm_80"``, ``"sm_90a"``, ``"sm_100a"``; an
    ``a`` suffix means arch-specific), or ``"any"``; give a range as ``("sm_90a", "sm_90a")``.
    ``variant`` names the implementation (unique per op; re-registering a variant replaces it).
    ``priority``: higher is tried first (ties: later registration first). ``when``: predicates
    ``pred(ctx) -> None | str`` -- ``None`` (or ``True``) when the fact holds, else a reason
    string that names the fact ("dst is 'local', TMA writes 'shared'"). Inside ``fn`` call
    ``fail(reason)`` to reject the call late (the next candidate is tried). ``fn`` returns the
    native IR (a :class:`~tirxpy.ir.Stmt`) that replaces the call in place. ``kwargs``: the keyword
    arguments (keyword -> meaning) the implementation reads beyond the primitive's own, which the
    verifier then accepts; an implementation registered from outside tirxpy without it lets any
    keyword argument of ``op`` through.

``fail(reason)``
    Raise :class:`ImplRejected`: this implementation does not apply, for ``reason``.

``dispatch_call(ctx) -> Choice``
    Try the candidates of ``ctx.op`` (restricted to ``ctx.call.dispatch`` when the call names a
    variant with ``dispatch="variant"``) and return the first that accepts: ``Choice(impl,
    stmt, rejected)`` where ``rejected`` lists the ``(impl, reason)`` tried before it. If none
    accepts, raise one :class:`DispatchError` listing every candidate (variant, priority,
    target) and its reason, pointing at the user's line.

``implementations(op)``: the registered candidates in trial order. ``unregister_impl(op, variant)``.
``ops()``: every primitive with an implementation. ``help_text(op)``: the op-spec entry of ``op``
followed by its implementations (what ``help(Tx.<op>)`` prints).

Errors: :class:`DispatchError` (no implementation applies, unknown variant, unknown primitive)
and :class:`LegalityError` (an implementation found the operands contradict the hardware
contract in a way no other candidate could fix); both are :class:`~tirxpy.ir.errors.TirxError`.

    >>> from tirxpy.primitives.dispatch import register_impl, implementations, unregister_impl, fail
    >>> @register_impl("doc_demo", "any", variant="only_floats", when=[lambda c: None])
    ... def _impl(ctx):
    ...     fail("the demo never lowers")
    >>> [i.variant for i in implementations("doc_demo")]
    ['only_floats']
    >>> unregister_impl("doc_demo", "only_floats")
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Sequence

from tirxpy.ir.errors import render
from tirxpy.scope.errors import TirxError
from tirxpy.errors import shown


class ImplRejected(Exception):
    """Raised by :func:`fail` inside an implementation: it does not apply, for ``reason``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def fail(reason: str):
    """Reject the current call from inside an implementation (the dispatcher tries the next)."""
    raise ImplRejected(str(reason))


class _SpanError(TirxError, ValueError):
    def __init__(self, msg: str, span=None, hint: str | None = None):
        self.msg, self.span, self.hint = msg, span, hint
        super().__init__(render(msg, span, hint))


class DispatchError(_SpanError):
    """No implementation of a primitive call applies (``.candidates`` holds ``(variant, priority,
    target, reason)`` rows), or a call names an unknown variant or primitive."""

    def __init__(self, msg, span=None, hint=None, candidates=()):
        self.candidates = list(candidates)
        super().__init__(msg, span, hint)


class LegalityError(_SpanError):
    """A call's operands break a hardware rule (names the element, owner or fact that disagrees)."""


_ANY = "any"


@dataclass
class Impl:
    """One registered implementation."""

    op: str
    variant: str
    fn: Callable
    target: object = _ANY
    priority: int = 0
    when: tuple = ()
    doc: str = ""
    order: int = 0
    requirement: object = field(default=None, repr=False)

    def target_text(self) -> str:
        return "any" if self.requirement is None else str(self.requirement)

    def target_reason(self, arch) -> str | None:
        if self.requirement is None:
            return None
        return self.requirement.missing(arch)

    def check(self, ctx) -> str | None:
        """The first predicate's reason, or None when every predicate holds."""
        why = self.target_reason(ctx.arch)
        if why is not None:
            return f"target {ctx.arch}: {why.split(' — ')[0]}"
        for p in self.when:
            try:
                r = p(ctx)
            except ImplRejected as e:
                return e.reason
            if r is None or r is True:
                continue
            if r is False:
                return f"predicate {getattr(p, '__name__', repr(p))} does not hold"
            return str(r)
        return None


_REGISTRY: dict[str, dict[str, Impl]] = {}
_ORDER = itertools.count()


def _requirement(target):
    if target in (None, _ANY):
        return None
    from tirxpy.intrinsics.target import Requirement

    if isinstance(target, (tuple, list)):
        lo, hi = target
        return Requirement(lo, hi, "the implementation emits instructions only these targets have")
    return Requirement(str(target))


def register_impl(op: str, target=_ANY, *, variant: str, priority: int = 0, when: Sequence = (), doc: str = "",
                  kwargs: dict | None = None):
    """Decorator: register ``fn(ctx) -> Stmt`` as implementation ``variant`` of primitive ``op``.

    ``kwargs`` (keyword -> meaning): the keyword arguments this implementation reads beyond the
    primitive's own; the verifier then accepts them. An implementation from outside tirxpy without
    ``kwargs=`` makes the verifier accept any keyword argument of ``op``."""
    if not isinstance(op, str) or not op.isidentifier():
        raise DispatchError(f"register_impl: a primitive name is an identifier, got {shown(op)}")
    if not isinstance(variant, str) or not variant.isidentifier():
        raise DispatchError(f"register_impl({shown(op)}): variant must be an identifier, got {shown(variant)}",
                            hint="name it after the instruction family, e.g. variant='tma_load'")
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise DispatchError(f"register_impl({shown(op)}, variant={shown(variant)}): priority must be an int, got "
                            f"{shown(priority)}")
    when = tuple(when)
    for p in when:
        if not callable(p):
            raise DispatchError(f"register_impl({shown(op)}, variant={shown(variant)}): predicate {shown(p)} is not "
                                "callable",
                                hint="a predicate is fn(ctx) -> None | reason string")
    try:
        req = _requirement(target)
    except TirxError as e:
        raise DispatchError(f"register_impl({shown(op)}, variant={shown(variant)}): bad target {shown(target)}: "
                            f"{e}") from None

    def deco(fn):
        if not callable(fn):
            raise DispatchError(f"register_impl({shown(op)}, variant={shown(variant)}) decorates a function fn(ctx) -> "
                                "Stmt")
        _ensure_op_spec(op, fn, kwargs)
        impl = Impl(op, variant, fn, target, priority, when, doc or (fn.__doc__ or "").strip().split("\n")[0],
                    next(_ORDER), req)
        _REGISTRY.setdefault(op, {})[variant] = impl
        fn.__tirx_impl__ = impl
        return fn

    return deco


def _ensure_op_spec(op, fn, kwargs):
    from tirxpy.ir.op_spec import accept_kwargs, lookup_op_spec, register_op_spec

    if lookup_op_spec(op) is None:
        register_op_spec(op, doc="user primitive (registered by register_impl)", kwargs=kwargs)
    elif kwargs is not None or not (getattr(fn, "__module__", "") or "").startswith("tirxpy."):
        accept_kwargs(op, kwargs)


def unregister_impl(op: str, variant: str) -> None:
    """Remove implementation ``variant`` of ``op`` (DispatchError when there is none)."""
    impls = _REGISTRY.get(op, {})
    if variant not in impls:
        raise DispatchError(f"primitive {shown(op)} has no implementation {shown(variant)}; it has {sorted(impls)}")
    del impls[variant]


def implementations(op: str) -> list[Impl]:
    """Candidates of ``op`` in trial order: priority descending, then newest registration first."""
    return sorted(_REGISTRY.get(op, {}).values(), key=lambda i: (-i.priority, -i.order))


def ops() -> list[str]:
    """Primitive names that have at least one implementation."""
    return sorted(k for k, v in _REGISTRY.items() if v)


def _module_summary(fn) -> str:
    import sys

    mod = sys.modules.get(getattr(fn, "__module__", None) or "")
    lines = (getattr(mod, "__doc__", None) or "").strip().splitlines()
    return lines[0] if lines else "(no description)"


def help_text(op: str, builtin_only: bool = False) -> str | None:
    """The op-spec entry of ``op`` (:meth:`~tirxpy.ir.op_spec.OpSpec.help_text`) and the
    implementations it may dispatch to, in trial order (``builtin_only``: those tirxpy defines);
    None when ``op`` has neither."""
    from tirxpy.ir.op_spec import lookup_op_spec

    spec, impls = lookup_op_spec(op), implementations(op)
    if builtin_only:
        impls = [i for i in impls if (getattr(i.fn, "__module__", "") or "").startswith("tirxpy.")]
    if spec is None and not impls:
        return None
    text = spec.help_text() if spec is not None else f"Tx.<scope>.{op}(...)"
    if not impls:
        return text + "\n\nImplementations: none registered"
    import textwrap

    rows = [textwrap.fill(f"{i.variant}  (target {i.target_text()}, priority {i.priority}): "
                          f"{i.doc or _module_summary(i.fn)}", 100, initial_indent="  ", subsequent_indent="      ",
                          break_on_hyphens=False) for i in impls]
    return text + "\n\nImplementations, tried in this order (the first that accepts the call lowers it):\n" + "\n".join(rows)


@dataclass
class Choice:
    """The outcome of dispatching one call."""

    impl: Impl
    stmt: object
    rejected: list


def _spelling(call) -> str:
    s = call.scope.short
    return f"Tx.{call.op}" if s == "thread" else f"Tx.{s}.{call.op}"


def dispatch_call(ctx) -> Choice:
    """Pick the implementation of ``ctx.call`` and lower it (see the module docstring)."""
    from tirxpy.ir.stmt import Stmt

    call = ctx.call
    what = _spelling(call)
    cands = implementations(call.op)
    if not cands:
        known = ops()
        import difflib

        close = difflib.get_close_matches(call.op, known, n=3)
        raise DispatchError(f"{what}: no implementation of primitive {shown(call.op)} is registered"
                            + (f"; did you mean {', '.join(close)}?" if close else ""), call.span,
                            hint="register one with tirxpy.primitives.register_impl(op, target, variant=..., when=[...])")
    if call.dispatch is not None:
        pick = [c for c in cands if c.variant == call.dispatch]
        if not pick:
            raise DispatchError(f"{what}(..., dispatch={shown(call.dispatch)}): {call.op} has no implementation "
                                f"{shown(call.dispatch)}", call.span,
                                hint="known variants: " + ", ".join(c.variant for c in cands))
        cands = pick
    rejected = []
    for impl in cands:
        reason = impl.check(ctx)
        if reason is None:
            mark = ctx._mark()
            try:
                stmt = impl.fn(ctx)
            except ImplRejected as e:
                ctx._reset(mark)
                reason = e.reason
            except TirxError:
                raise
            except Exception as e:  # a bug in the implementation: report it at the user's line
                raise DispatchError(f"{what}: implementation {impl.op}/{impl.variant} failed internally: "
                                    f"{type(e).__name__}: {e}", call.span,
                                    hint="this is a bug in the implementation; pass dispatch= another variant "
                                         "to work around it") from e
            else:
                if not isinstance(stmt, Stmt):
                    raise DispatchError(f"{what}: implementation {shown(impl.variant)} returned {shown(stmt)}, not a "
                                        "statement",
                                        call.span, hint="an implementation returns native IR (a tirxpy.ir Stmt) or calls fail(reason)")
                return Choice(impl, stmt, rejected)
        rejected.append((impl, reason))
    rows = [(i.variant, i.priority, i.target_text(), r) for i, r in rejected]
    width = max(len(v) for v, *_ in rows)
    table = "\n".join(f"  {v:<{width}}  priority {p:>3}  target {t:<8}  {r}" for v, p, t, r in rows)
    restricted = f" (restricted by dispatch={call.dispatch!r})" if call.dispatch is not None else ""
    raise DispatchError(
        f"{what}: no implementation applies to {ctx.describe()}{restricted}", call.span,
        hint=f"every candidate was rejected:\n{table}\n"
             "change the fact a candidate names (layout, storage scope, dtype, execution scope or target)",
        candidates=rows)
