"""The op-spec table: one entry per tile primitive, the single source of what a call may be.

An entry (:class:`OpSpec`) holds what the verifier checks (scope range, operand count, storage
scope per operand position, dtype / shape agreement, the keyword arguments the primitive takes)
and what a reader needs (the call's signature, what it does, what each keyword argument means,
how the math is approximated). ``help(Tx.copy_async)`` and ``docs/reference/`` are rendered from
it. ``register_op_spec(name, ...)`` adds or replaces an entry; ``kwargs=None`` (the default for
user primitives) lets any keyword argument through, a dict names the only ones accepted
(``dispatch=`` is always accepted: it picks an implementation variant). An implementation
registered from outside tirxpy widens them (:func:`accept_kwargs`): with
``register_impl(..., kwargs={"name": "meaning"})`` by those keywords, without ``kwargs=`` to any.

    >>> from tirxpy.ir.op_spec import lookup_op_spec
    >>> spec = lookup_op_spec("copy_async")
    >>> spec.operand_storage[0]
    ('shared', 'shared::cluster', 'global', 'tmem')
    >>> spec.unknown_kwargs({"mbar": 0, "mbarrier": 0})
    ['mbarrier']
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tirxpy.scope import Scope
from tirxpy.scope.tx import set_doc_source
from tirxpy.errors import shown

from .buffer import check_storage
from .errors import IRError


@dataclass(frozen=True)
class OpSpec:
    """Rules and documentation of primitive ``name``.

    ``min_scope`` / ``max_scope``: the execution scopes it may be called at; ``n_operands``:
    ``(lo, hi)`` positional operands (``hi`` None: no limit); ``operand_storage``: position ->
    allowed storage scopes; ``same_dtype`` / ``same_shape``: tensor operands agree; ``kwargs``:
    keyword argument -> meaning (None: any keyword is accepted); ``signature``: how a call is
    written; ``doc``: what it does, including approximations."""

    name: str
    min_scope: Scope = Scope.THREAD
    max_scope: Scope = Scope.CLUSTER
    n_operands: tuple = (0, None)
    operand_storage: dict = field(default_factory=dict)
    same_dtype: bool = False
    same_shape: bool = False
    doc: str = ""
    kwargs: dict | None = None
    signature: str = ""

    def unknown_kwargs(self, attrs) -> list[str]:
        """The keyword arguments in ``attrs`` this primitive does not take, sorted."""
        if self.kwargs is None:
            return []
        return sorted(k for k in attrs if k not in self.kwargs and k != "dispatch")

    def help_text(self) -> str:
        """The entry as text: signature, description, keyword arguments, rules."""
        lines = [self.signature or f"Tx.<scope>.{self.name}(...)", "", _wrap(self.doc or "(no description)"), ""]
        if self.kwargs:
            lines.append("Keyword arguments:")
            lines += [_wrap(f"{k}=  {v}", "  ", "      ") for k, v in self.kwargs.items()]
        elif self.kwargs is None:
            lines.append("Keyword arguments: any (not checked by the verifier)")
        else:
            lines.append("Keyword arguments: none")
        lines.append("  dispatch=  name an implementation variant (see tirxpy.primitives.implementations)")
        lo, hi = self.n_operands
        lines += ["", f"Scopes: {self.min_scope} to {self.max_scope}; operands: "
                  + (str(lo) if lo == hi else f"{lo} to {hi if hi is not None else 'any'}")]
        for pos, allowed in sorted(self.operand_storage.items()):
            lines.append(f"  operand {pos} in {', '.join(allowed)}")
        return "\n".join(lines)


_OPS: dict[str, OpSpec] = {}


def _wrap(text: str, first: str = "", rest: str = "") -> str:
    import textwrap

    return textwrap.fill(text, 100, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False)


def _check_kwargs(name, kwargs):
    if kwargs is None:
        return None
    if not isinstance(kwargs, dict):
        raise IRError(f"register_op_spec({shown(name)}): kwargs= maps each keyword argument to its meaning (a dict), "
                      f"got {type(kwargs).__name__}")
    for k, v in kwargs.items():
        if not isinstance(k, str) or not k.isidentifier() or k == "dispatch":
            raise IRError(f"register_op_spec({shown(name)}): keyword argument {shown(k)} is not an identifier other "
                          "than 'dispatch' (dispatch= is always accepted)")
        if not isinstance(v, str):
            raise IRError(f"register_op_spec({shown(name)}): the meaning of {k}= is a str, got {type(v).__name__}")
    return dict(kwargs)


def register_op_spec(name: str, *, min_scope="thread", max_scope="cluster", n_operands=(0, None),
                     operand_storage=None, same_dtype=False, same_shape=False, doc="", kwargs=None,
                     signature="") -> OpSpec:
    """Register (or replace) the entry of primitive ``name`` (see :class:`OpSpec` for the fields)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise IRError(f"a primitive name is an identifier, got {shown(name)}")
    if isinstance(n_operands, int):
        n_operands = (n_operands, n_operands)
    st = {}
    for pos, allowed in dict(operand_storage or {}).items():
        if isinstance(allowed, str):
            allowed = (allowed,)
        st[int(pos)] = tuple(check_storage(a) for a in allowed)
    spec = OpSpec(name, Scope.get(min_scope), Scope.get(max_scope), tuple(n_operands), st, same_dtype, same_shape,
                  str(doc), _check_kwargs(name, kwargs), str(signature))
    if spec.min_scope > spec.max_scope:
        raise IRError(f"min_scope {spec.min_scope} is wider than max_scope {spec.max_scope}")
    _OPS[name] = spec
    return spec


def accept_kwargs(name: str, kwargs=None) -> OpSpec:
    """Widen the keyword arguments primitive ``name`` accepts: ``kwargs`` (keyword -> meaning) joins
    its table; None accepts any keyword from now on. ``register_impl`` calls this for an implementation
    registered from outside tirxpy, whose keywords the table cannot know."""
    import dataclasses

    spec = _OPS.get(name)
    if spec is None:
        raise IRError(f"primitive {shown(name)} has no op-spec entry; register it with register_op_spec first")
    kwargs = _check_kwargs(name, kwargs)
    if spec.kwargs is None:
        return spec
    merged = None if kwargs is None else {**spec.kwargs, **kwargs}
    _OPS[name] = spec = dataclasses.replace(spec, kwargs=merged)
    return spec


def lookup_op_spec(name: str) -> OpSpec | None:
    """The entry of primitive ``name``, or None."""
    return _OPS.get(name)


def op_names() -> list[str]:
    """Every primitive with an entry, sorted."""
    return sorted(_OPS)


def _doc_of(op: str) -> str | None:
    spec = _OPS.get(op)
    return None if spec is None else spec.help_text()


set_doc_source(_doc_of, op_names)

# ---------------------------------------------------------------- the table
_ONCHIP = ("shared", "shared::cluster", "local", "tmem")
_GUARD = ("bool, default True: skip the elements of a global tensor that fall outside it at a ragged tile "
          "edge; False drops the bounds test (the tile is known to fit)")
_COMPUTE = ("dtype the math runs in (default: float32 when dst is a narrower float, else dst's dtype)")
_TADDR = ("32-bit tensor-memory address of the TMEM operand's buffer, what tcgen05.alloc wrote to shared "
          "memory (e.g. taddr=tmem_base[0]); required when an operand is in TMEM")
_MBAR = "one uint64 mbarrier element in shared memory (e.g. bars[stage])"
_GEMM_KW = {
    "transpose_a": "bool, default False: A is stored (K, M) instead of (M, K)",
    "transpose_b": "bool, default False: B is stored (N, K) instead of (K, N)",
    "accumulate": "bool or boolean expression, default True: C += A @ B; False overwrites C with A @ B",
    "taddr": "tcgen05: " + _TADDR + " (C's buffer)",
    "mbar": "tcgen05: " + _MBAR + " that tcgen05.commit arrives on once the MMAs complete",
    "cta_mask": "tcgen05: 16-bit mask of cluster CTA ranks whose mbar the commit arrives on (multicast "
                "commit; needs mbar=)",
    "cta_group": "tcgen05: 1 (default) or 2; with 2 a CTA pair issues one MMA over both CTAs' tiles (B holds "
                 "N / 2 columns per CTA; launch with an even cluster)",
    "sfa": "tcgen05 block scaling (kind::mxf8f6f4.block_scale, 8-bit float A and B): A's scale factors, a TMEM tile",
    "sfb": "tcgen05 block scaling: B's scale factors, a TMEM tile (give both sfa= and sfb=)",
    "sf_taddr": "tcgen05 block scaling: TMEM address the scale-factor tiles are relative to (default taddr=)",
}
_WAIT = ("wgmma: an int 0..7; after the commit, wait until at most this many committed wgmma groups are pending "
         "and fence C's registers (default: no wait; use Tx.wg.gemm_wait later)")
_FAST_MATH = {  # what the math is when it runs in float32 (a float32 dst, or a narrower float one)
    "exp": "In float32: ex2.approx.ftz.f32(x * log2(e)) on the SFU (about 2 ulp, subnormals flushed to zero); "
           "in other compute dtypes: the CUDA math library exp.",
    "exp2": "In float32: ex2.approx.ftz.f32 on the SFU (about 2 ulp, subnormals flushed to zero); in other "
            "compute dtypes: the CUDA math library exp2.",
    "sigmoid": "In float32: rcp.approx.ftz.f32(1 + ex2.approx.ftz.f32(-x * log2(e))) (about 2 ulp); in other "
               "compute dtypes: 1 / (1 + exp(-x)).",
    "silu": "In float32: x * rcp.approx.ftz.f32(1 + ex2.approx.ftz.f32(-x * log2(e))) (about 2 ulp); in other "
            "compute dtypes: x / (1 + exp(-x)).",
    "relu": "max(x, 0), exact.",
    "neg": "-x, exact.",
}
_MAP_DOC = ("Element-wise on register tiles, per thread, slot by slot. Operands broadcast to dst by numpy "
            "rules (align right, extent 1 broadcasts) or are scalar expressions; every destination element a "
            "thread holds must be read from operand elements the same thread holds. Narrow floats compute in "
            "float32. ")
_FN = "the element-wise function, one of exp, exp2, log, log2, sqrt, rsqrt, abs, neg, relu, silu, sigmoid, " \
      "tanh, copy, add, sub, mul, div, maximum, minimum, fma"
_REDUCE_KW = {
    "axis": "int, default -1: the dimension of src that is reduced (dst is src's shape without it, or with "
            "extent 1 there)",
    "accum": "bool, default False: combine the result with dst's current value instead of overwriting it",
}

register_op_spec(
    "copy", n_operands=2, same_shape=True, signature="Tx.<scope>.copy(dst, src, **kw)",
    doc="dst <- src, synchronous: registers <-> global / shared (vectorized when both layouts allow), "
        "shared <-> global / shared by all active threads, ldmatrix / stmatrix fragments, registers <-> "
        "TMEM (tcgen05.ld / tcgen05.st, taddr=). Elements convert to dst's dtype.",
    kwargs={"guard": _GUARD, "taddr": "tcgen05.ld / tcgen05.st: " + _TADDR, "compute": _COMPUTE,
            "depth": "global <-> a peer's global (copy/peer_vec): int 1..16, default 4: the vectors each thread "
                     "loads before it stores them (loads in flight at once; 4 registers a 16-byte vector)"})
register_op_spec(
    "copy_async", n_operands=2, same_shape=True, signature="Tx.<scope>.copy_async(dst, src, **kw)",
    operand_storage={0: ("shared", "shared::cluster", "global", "tmem"), 1: ("global", "shared", "shared::cluster")},
    doc="Asynchronous dst <- src; one side is shared memory. A TMA load (global -> shared) completes on mbar=, "
        "with the box's bytes registered as expected transactions; a TMA store (shared -> global) is a bulk "
        "group; cp.async (global -> shared, no mbar=) is a commit group; tcgen05.cp copies shared -> TMEM.",
    kwargs={
        "mbar": "TMA load: " + _MBAR + " the load completes on (required; cp.async refuses it)",
        "multicast": "TMA load (sm_90a): 16-bit mask of cluster CTA ranks that each receive the box",
        "cta_group": "TMA load: 1 (default) or 2; with 2 the load completes on the mbarrier of the CTA pair's "
                     "even (leader) CTA, for a tcgen05 cta_group::2 MMA",
        "arrive": "TMA load: bool, default True: the issuing thread arrives on mbar; False only registers the "
                  "expected bytes (another arrival completes the phase)",
        "expect_tx": "TMA load: bool, default True: register the box's byte count on mbar; False arrives "
                     "without it (the bytes were registered elsewhere)",
        "reduce": "TMA store: 'add' reduce-adds into global memory instead of overwriting it",
        "taddr": "tcgen05.cp (shared -> TMEM): " + _TADDR,
        "guard": "cp.async: " + _GUARD + " (outside elements are zero-filled)",
    })
register_op_spec(
    "fill", n_operands=(1, 2), signature="Tx.<scope>.fill(dst, value, **kw)",
    doc="dst <- value: every register slot of a register tile, or every element of a shared / global tile "
        "(one element per active thread per step).",
    kwargs={"guard": _GUARD})
register_op_spec(
    "cast", n_operands=2, same_shape=True, signature="Tx.<scope>.cast(dst, src)",
    doc="dst[e] <- dst.dtype(src[e]) on register tiles, slot by slot (the same thread holds both).", kwargs={})
register_op_spec(
    "gemm", n_operands=(3, 4), operand_storage={0: ("local", "shared", "tmem")},
    signature="Tx.<scope>.gemm(C, A, B, **kw)",
    doc="C (+)= A @ B, synchronous: C is (M, N), A (M, K), B (K, N). mma.sync on register fragments "
        "(warp scope, sm_80), wgmma with wait_group 0 (warpgroup scope, sm_90a, A in shared or registers, B in "
        "shared). tcgen05.mma is asynchronous: write Tx.gemm_async.",
    kwargs=dict(_GEMM_KW))
register_op_spec(
    "gemm_async", n_operands=(3, 4), signature="Tx.<scope>.gemm_async(C, A, B, **kw)",
    operand_storage={0: ("local", "tmem"), 1: ("shared", "local", "tmem"), 2: ("shared",)},
    doc="Asynchronous tensor-core C (+)= A @ B. wgmma (warpgroup scope, sm_90a): fence, one wgmma per 64xN "
        "tile and k-step, commit_group, then wait= or a later Tx.wg.gemm_wait. tcgen05.mma (one thread, "
        "sm_100a, C in TMEM): one MMA per N-tile and k-step, then tcgen05.commit to mbar=. The matrix "
        "descriptors come from A's and B's shared-memory layouts.",
    kwargs=dict(_GEMM_KW, wait=_WAIT))
register_op_spec(
    "gemm_wait", min_scope="warpgroup", max_scope="warpgroup", n_operands=(1, None),
    signature="Tx.wg.gemm_wait(n, C, ...)",
    doc="Wait until at most n (an int 0..7) committed async gemm groups are pending (wgmma.wait_group n), then "
        "fence the named accumulators C so no read of them moves above the wait.", kwargs={})
register_op_spec(
    "mask", n_operands=3, operand_storage={0: ("local",)}, signature="Tx.<scope>.mask(dst, src, value, **kw)",
    doc="dst[r, c] <- src[r, c] where c < cols and c <= r + diag, else value (2-D register tiles held slot for "
        "slot by the same threads; one compare and one select per register): the ragged-key and causal masks "
        "of attention.",
    kwargs={"cols": "scalar expression: columns at or past it are masked (None: no column bound)",
            "diag": "scalar expression: column c of row r is kept while c <= r + diag (None: no diagonal bound)"})
for _op in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "neg", "relu", "silu", "sigmoid", "tanh"):
    register_op_spec(_op, n_operands=2, operand_storage={0: _ONCHIP}, signature=f"Tx.<scope>.{_op}(dst, a, **kw)",
                     doc=_MAP_DOC + f"dst <- {_op}(a). " + _FAST_MATH.get(_op, f"The CUDA math library {_op} (full precision)."),
                     kwargs={"compute": _COMPUTE})
for _op, _sym in (("add", "a + b"), ("sub", "a - b"), ("mul", "a * b"), ("div", "a / b"), ("maximum", "max(a, b)"),
                  ("minimum", "min(a, b)"), ("relu_grad", "0 where b <= 0, else a (ReLU's backward: a the gradient, b "
                                                          "the ReLU's output; a select, so a NaN b passes a)")):
    register_op_spec(_op, n_operands=3, operand_storage={0: _ONCHIP}, signature=f"Tx.<scope>.{_op}(dst, a, b, **kw)",
                     doc=_MAP_DOC + f"dst <- {_sym}.", kwargs={"compute": _COMPUTE})
register_op_spec("fma", n_operands=4, operand_storage={0: _ONCHIP}, signature="Tx.<scope>.fma(dst, a, b, c, **kw)",
                 doc=_MAP_DOC + "dst <- fma(a, b, c) = a * b + c, one rounding.", kwargs={"compute": _COMPUTE})
for _op, _n in (("unary", 2), ("binary", 3), ("map", (2, 4))):
    register_op_spec(_op, n_operands=_n, operand_storage={0: _ONCHIP},
                     signature=f"Tx.<scope>.{_op}(dst, operands..., fn=name, **kw)",
                     doc=_MAP_DOC + "dst <- fn(operands...), fn named by keyword (see the per-function entries, "
                                    "e.g. exp, for approximations).",
                     kwargs={"fn": _FN, "compute": _COMPUTE})
register_op_spec("reduce", n_operands=2, operand_storage={0: _ONCHIP, 1: _ONCHIP},
                 signature="Tx.<scope>.reduce(dst, src, op='sum', axis=-1, accum=False)",
                 doc="dst <- reduce(src) over one axis of a register tile: in-thread fold, then shfl.bfly over the "
                     "axis's lane bits, then (axis spread over warps, whole-CTA call) partials through shared memory.",
                 kwargs=dict(_REDUCE_KW, op="'sum' (default), 'max' or 'min'"))
for _op in ("sum", "max", "min"):
    register_op_spec(_op, n_operands=2, operand_storage={0: _ONCHIP, 1: _ONCHIP},
                     signature=f"Tx.<scope>.{_op}(dst, src, axis=-1, accum=False)",
                     doc=f"dst <- {_op} of src over one axis: Tx.reduce with op='{_op}'.", kwargs=dict(_REDUCE_KW))

BUILTIN_OPS = frozenset(_OPS)  # the primitives tirxpy defines (user registrations come later)
