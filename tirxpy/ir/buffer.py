"""Tensors with a storage scope and a layout, and views (regions) of them.

A :class:`Buffer` has a name, a static shape, a dtype, a storage scope (``global``,
``shared``, ``shared::cluster``, ``local`` (registers), ``tmem``) and a layout of its logical
shape (default: row-major on ``m``). Indexing reads elements or takes views:

    >>> from tirxpy.ir import Buffer, Var
    >>> A = Buffer("A", (256, 128), "bfloat16")
    >>> A.layout
    TileLayout(S[(256, 128) : (128@m, 1@m)])
    >>> A[3, 4]
    A[3, 4]
    >>> v = A[64:128, 32:96]
    >>> v.shape, v.layout
    ((64, 64), TileLayout(S[(64, 64) : (128@m, 1@m)] + 8224@m))
    >>> m0 = Var("m0")
    >>> w = A[m0:m0 + 64, 0:64]
    >>> w.layout, w.offset
    (TileLayout(S[(64, 64) : (128@m, 1@m)]), {'m': m0 * 128})
    >>> smem = Buffer("smem", (3, 128, 64), "float16", "shared")
    >>> smem[Var("stage")].shape
    (128, 64)
"""
from __future__ import annotations

import operator
from math import prod

from tirxpy.layout import Iter, Layout, LayoutError, TileLayout
from tirxpy.target import MAX_REGISTERS, TMEM_COLUMNS
from tirxpy.target import MAX_SMEM_PER_CTA as SMEM_LIMIT
from tirxpy.errors import shown

from .dtype import DataType
from .errors import IRError
from .expr import Expr, IntImm
from .node import Node

STORAGE_SCOPES = ("global", "shared", "shared::cluster", "local", "tmem")
_STORAGE_ALIASES = {
    "register": "local", "registers": "local", "reg": "local", "tensor_memory": "tmem", "shared::cta": "shared",
    "smem": "shared", "gmem": "global",
}


def check_storage(storage) -> str:
    """Canonical storage scope name (``"registers"`` -> ``"local"``)."""
    name = str.__str__(storage) if isinstance(storage, str) else None     # (a str subclass as the plain str it holds)
    s = _STORAGE_ALIASES.get(name, name)
    if s not in STORAGE_SCOPES:
        raise IRError(f"unknown storage scope {shown(storage)}; use one of {', '.join(STORAGE_SCOPES)}")
    return s


#: Hardware limits every target shares (the largest over all targets, from tirxpy.target: SMEM_LIMIT,
#: TMEM_COLUMNS, MAX_REGISTERS): one allocation that breaks one is refused when it is built, in closed
#: form, before anything is materialized.
MAX_DIMS = 16                # tensor rank
MAX_ELEMENTS = 1 << 62       # elements of any tensor (byte offsets fit int64)


def _check_shape(shape) -> tuple:
    """``shape`` as a tuple of ints >= 1 (an int is a 1-D shape); IRError for anything else."""
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not shape:
        raise IRError(f"a tensor shape is a non-empty tuple of positive ints, got {shown(shape, 100)}",
                      hint="write e.g. (128, 64)")
    if len(shape) > MAX_DIMS:
        raise IRError(f"a tensor shape has at most {MAX_DIMS} dimensions, got {len(shape)}",
                      hint="merge dimensions: a layout places the elements, the shape need not mirror it")
    out = []
    for n in shape:
        try:
            if isinstance(n, (Expr, bool)):
                raise TypeError
            n = operator.index(n)
        except Exception:   # noqa: BLE001  (no __index__, or one of its own that raises)
            what = "the bool" if isinstance(n, bool) else "the non-static extent" if isinstance(n, Expr) else \
                f"the {type(n).__name__}"
            raise IRError(f"tensor shape {shown(tuple(shape), 100)} has {what} {shown(n, 40)}; extents are ints >= 1",
                          hint="tensor shapes are compile-time ints; specialize the kernel on them with @tirxpy.jit"
                          if isinstance(n, Expr) else "write the extent as a Python int, e.g. 128") from None
        if n < 1:
            raise IRError(f"tensor shape {shown(tuple(shape), 100)} has extent {shown(n, 60)}; extents must be >= 1")
        out.append(n)
    if prod(out) > MAX_ELEMENTS:
        raise IRError(f"tensor shape {shown(tuple(out), 100)} has {shown(prod(out), 60)} elements, over the "
                      f"{MAX_ELEMENTS} (2**62) any tensor may have")
    return tuple(out)


def _check_layout(layout):
    """``layout`` when it is None or a :class:`~tirxpy.layout.Layout`; IRError otherwise."""
    if layout is not None and not isinstance(layout, Layout):
        raise IRError(f"layout= takes a TileLayout or ComposeLayout, got {shown(layout)}",
                      hint="build one with TileLayout(S[extents : strides]) from tirxpy.layout")
    return layout


def default_layout(shape, dtype, storage) -> Layout:
    """Row-major on ``m``; for ``tmem`` a (lanes, columns) tile on ``TLane`` / ``TCol`` (32-bit types)."""
    if storage == "tmem":
        dt = DataType.get(dtype)
        if len(shape) != 2 or shape[0] > 128 or dt.bits != 32:
            raise IRError(
                f"tensor memory of shape {shape} and dtype {dt} has no default layout",
                hint="give layout=TileLayout(S[(rows, cols) : (1@TLane, 1@TCol)]) (rows <= 128; pack sub-32-bit types per column)",
            )
        return TileLayout.from_iters([Iter(shape[0], 1, "TLane"), Iter(shape[1], 1, "TCol")])
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return TileLayout.from_iters([Iter(n, s, "m") for n, s in zip(shape, reversed(strides))])


class Buffer(Node):
    """A tensor: ``Buffer(name, shape, dtype, storage="global", layout=None)``."""

    _fields = ("name", "shape", "dtype", "storage", "layout")

    def __init__(self, name: str, shape, dtype, storage: str = "global", layout=None, span=None):
        super().__init__(span)
        if not isinstance(name, str) or not name.isidentifier():
            raise IRError(f"a tensor name must be a Python identifier, got {shown(name)}")
        self.name = name
        self.shape = _check_shape(shape)
        self.dtype = DataType.get(dtype)
        self.storage = check_storage(storage)
        if _check_layout(layout) is None:
            layout = default_layout(self.shape, self.dtype, self.storage)
        if layout.size() != prod(self.shape):
            n, k = prod(self.shape), prod(self.shape) // max(layout.size(), 1)
            stacked = k > 1 and k * layout.size() == n
            raise IRError(
                f"layout {shown(layout)} has {layout.size()} elements but tensor {name} has shape {self.shape} "
                f"({n} elements)",
                hint=f"the tensor holds {k} copies of the layout's tile (a stage dimension?): build the layout over "
                     "the whole shape, the stages outermost, e.g. ComposeLayout(swizzle_for(...), "
                     "TileLayout(S[(STAGES, rows, cols)])) for a swizzled ring of shared tiles" if stacked else
                     "give a layout whose extents multiply to the tensor's element count",
            )
        self.layout = layout
        self.base = None  # the buffer whose storage this one aliases (see alias())
        used = storage_limit(self) if self.storage in ("shared", "shared::cluster", "tmem") else None
        if used is not None and used[0] > used[1]:     # registers are summed by the verifier
            raise IRError(f"{name} {self.shape} {self.dtype} in {self.storage} memory needs {used[0]} {used[2]}, "
                          f"over the limit of {used[1]}",
                          hint="use a smaller tile, fewer stages, or spread a register tile over lanes and warps "
                               "with a layout")

    @property
    def root(self) -> "Buffer":
        """The buffer that owns the storage (itself unless this is an :meth:`alias`)."""
        return self if self.base is None else self.base

    def alias(self, shape, dtype=None, layout=None, name=None) -> "Buffer":
        """Another view of the same storage: a new shape, dtype and layout over the same bytes.

        Lowering uses it to reach a thread's raw register slots of a distributed tile, or to
        reinterpret storage (two bf16 as one uint32). The alias's ``m`` coordinate counts
        elements of its own dtype from the start of the root's storage.

            >>> from tirxpy.ir import Buffer
            >>> acc = Buffer("acc", (64, 16), "float32", "local")
            >>> slots = acc.alias((8,), name="acc_slots")
            >>> slots.root is acc, slots.storage, slots.shape
            (True, 'local', (8,))
        """
        root = self.root
        a = Buffer(name or f"{root.name}_alias", shape, dtype or root.dtype, root.storage, layout, self.span)
        if -(-footprint(a.layout) * a.dtype.bits // 8) > root.bytes():
            raise IRError(
                f"alias {a.name} {a.shape} {a.dtype} needs {a.bytes()} bytes but {root.name} has only {root.bytes()}",
                hint="an alias views existing storage; make it no larger than the buffer it aliases",
            )
        a.base = root
        return a

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, key):
        from . import ops
        from .expr import BufferLoad

        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > self.ndim:
            raise IRError(f"{self.name} has {self.ndim} dimension(s) {self.shape} but is indexed with {len(key)}",
                          hint=f"give at most {self.ndim} indices")
        if len(key) == self.ndim and not any(isinstance(k, slice) for k in key):
            idx = tuple(self._index(k, d) for d, k in enumerate(key))
            return BufferLoad(self, idx)
        starts, extents, squeeze = [], [], []
        for d in range(self.ndim):
            n = self.shape[d]
            k = key[d] if d < len(key) else slice(None)
            if isinstance(k, slice):
                if k.step is not None:
                    raise IRError(f"dimension {d} of {self.name}: strided slices are not supported",
                                  hint="slice a contiguous range A[a:b] and give the stride in a layout")
                lo = self._index(0 if k.start is None else k.start, d, bound=False)
                hi = n if k.stop is None else k.stop
                ext = ops.sub(hi, lo)
                if not isinstance(ext, IntImm):
                    raise IRError(
                        f"dimension {d} of {self.name}: the slice extent `{ext}` is not a compile-time constant",
                        hint="write the stop as start + constant, e.g. A[m0:m0 + 128]",
                    )
                e = ext.value
                if isinstance(lo, IntImm) and e >= 1 and 0 <= lo.value < n < lo.value + e:
                    raise IRError(f"dimension {d} of {self.name}: slice [{lo}, {lo} + {e}) passes the edge of [0, {n}); "
                                  "a view whose start is a constant lies inside its tensor",
                                  hint=f"view [{lo}, {n}), or, for a tile clipped at the edge (TMA, guarded loads and "
                                       f"stores), start it at a device expression, e.g. T.cta_id(0) * {e}")
                if e < 1 or (isinstance(lo, IntImm) and (lo.value < 0 or lo.value + e > n)):
                    raise IRError(f"dimension {d} of {self.name}: slice [{lo}, {lo} + {e}) is empty or outside [0, {n})")
                starts.append(lo)
                extents.append(e)
                squeeze.append(False)
            else:
                starts.append(self._index(k, d))
                extents.append(1)
                squeeze.append(True)
        view = BufferRegion(self, starts, extents, squeeze)
        if any(e > n for e, n in zip(extents, self.shape)):
            _viewed_layout(view, [(0, e) for e in extents])     # refused now, at the view, where it cannot grow
        return view

    def _index(self, k, d, bound=True):
        from . import ops

        if isinstance(k, Buffer) or isinstance(k, BufferRegion):
            raise IRError(f"index {d} of {self.name} is a tensor; index with an integer expression, e.g. {k.name}[i]" if isinstance(k, Buffer) else f"index {d} of {self.name} is a tensor view")
        e = ops.const(k) if not isinstance(k, Expr) else k
        if e.dtype is None or not e.dtype.is_int:
            raise IRError(f"index {d} of {self.name} has dtype {e.dtype}; indices are integers",
                          hint="cast it with T.int32(x)")
        if bound and isinstance(e, IntImm) and not 0 <= e.value < self.shape[d]:
            raise IRError(f"index {e.value} is out of range [0, {self.shape[d]}) in dimension {d} of {self.name}")
        return e

    def __setitem__(self, key, value):
        raise IRError(f"stores to {self.name} are written in a @T.prim_func body: `{self.name}[i] = value`")

    def full(self) -> "BufferRegion":
        """The whole tensor as a region."""
        return BufferRegion(self, [IntImm(0)] * self.ndim, self.shape, [False] * self.ndim)

    def bytes(self) -> int:
        """Storage footprint in bytes: the highest ``m`` slot the layout touches, plus one."""
        return -(-footprint(self.layout) * self.dtype.bits // 8)


def footprint(layout, axis="m") -> int:
    """Number of slots on ``axis`` a layout reaches (max coordinate + 1).

    Closed form for a :class:`~tirxpy.layout.TileLayout` (offset plus each iterator's
    ``(extent - 1) * stride``: strides are non-negative, so the maximum is every iterator at its
    last value); a swizzled layout is evaluated exactly when its table is small
    (:data:`_TABLE_ROWS`), else bounded in closed form (the swizzle changes only bits below
    ``per_element + swizzle_len`` of the coordinate).

        >>> from tirxpy.layout import S, TileLayout
        >>> footprint(TileLayout(S[(2**40, 4) : (8, 1)]))
        8796093022204
    """
    from tirxpy.layout import ComposeLayout

    if isinstance(layout, TileLayout):
        return _tile_reach(layout, axis) + 1
    if isinstance(layout, ComposeLayout):
        tile = layout.tile_layout
        if not layout.swizzle_inner or axis != layout.swizzle.axis.name:
            return _tile_reach(tile, axis) + 1
        if tile.size() * tile.replica_count > _TABLE_ROWS:
            sw = layout.swizzle
            return (_tile_reach(tile, axis) | ((1 << (sw.per_element + sw.swizzle_len)) - 1)) + 1
    if layout.size() > _TABLE_ROWS:
        raise IRError(f"cannot size a {type(layout).__name__} of {layout.size()} elements without enumerating them",
                      hint="use a TileLayout (or a swizzled one) for large tensors")
    names, t = layout.owner_table()
    if axis not in names:
        return 1
    return int(t[:, :, names.index(axis)].max()) + 1


_TABLE_ROWS = 1 << 20   # largest layout table footprint() builds (above it: closed form only)


def _tile_reach(layout, axis) -> int:
    """The largest coordinate a TileLayout reaches on ``axis`` (0 when it places nothing there)."""
    hi = layout.offset.get(axis, 0)
    for it in layout.shard + layout.replica:
        if it.axis.name == axis:
            hi += (it.extent - 1) * it.stride
    return hi


def storage_limit(buf) -> tuple | None:
    """``(amount, limit, unit)`` of the hardware resource ``buf``'s storage uses, in closed form (None
    for global memory): bytes of shared memory per CTA, 32-bit registers per thread of a ``local``
    tile, columns of tensor memory."""
    if buf.storage in ("shared", "shared::cluster"):
        return buf.bytes(), SMEM_LIMIT, "bytes of shared memory per CTA"
    if buf.storage == "local":
        return -(-footprint(buf.layout, "m") * buf.dtype.bits // 32), MAX_REGISTERS, "32-bit registers per thread"
    if buf.storage == "tmem":
        return tmem_columns(buf), TMEM_COLUMNS, "tensor-memory columns"
    return None


def tmem_columns(buf) -> int:
    """Tensor-memory columns ``buf`` spans (32-bit columns; 64-bit types take two)."""
    if "TCol" not in buf.layout.axes():
        return 0
    return footprint(buf.layout, "TCol") * max(1, buf.dtype.bits // 32)


class BufferRegion(Node):
    """A view ``A[m0:m0 + 128, k0:k0 + 64]`` or ``smem[stage]``.

    ``starts`` are (possibly symbolic) index expressions, ``extents`` static ints, and
    ``squeeze[d]`` is True where dimension ``d`` was indexed by a scalar (it is dropped from
    :attr:`shape`). :attr:`layout` is the sliced layout; when some starts are symbolic the
    layout is sliced at 0 there and :attr:`offset` holds the symbolic part, ``{axis: Expr}``
    (for a swizzled layout, in the coordinate before the swizzle).
    """

    _fields = ("buffer", "starts", "extents", "squeeze")

    def __init__(self, buffer: Buffer, starts, extents, squeeze=None, span=None):
        super().__init__(span)
        from . import ops

        self.buffer = buffer
        self.starts = tuple(ops.const(s) if not isinstance(s, Expr) else s for s in starts)
        self.extents = tuple(int(e) for e in extents)
        self.squeeze = tuple(bool(s) for s in (squeeze or [False] * len(self.extents)))
        if not (len(self.starts) == len(self.extents) == len(self.squeeze) == buffer.ndim):
            raise IRError(f"a region of {buffer.name} needs one start and extent per dimension ({buffer.ndim})")
        self._layout = None

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def dtype(self) -> DataType:
        return self.buffer.dtype

    @property
    def storage(self) -> str:
        return self.buffer.storage

    @property
    def shape(self) -> tuple:
        return tuple(e for e, s in zip(self.extents, self.squeeze) if not s)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _compute(self):
        if self._layout is None:
            from .sym import from_sympy, to_sympy, SymTable

            table = SymTable()
            static = [s.value if isinstance(s, IntImm) else 0 for s in self.starts]
            region = [(a, a + e) for a, e in zip(static, self.extents)]
            whole, shape = _viewed_layout(self, region)
            lay = slice_layout(whole, region, shape)
            offset = {}
            if any(not isinstance(s, IntImm) for s in self.starts):
                base = _tile_part(self.buffer.layout)
                sym = [to_sympy(s, table)[0] for s in self.starts]
                hi = base.apply(*sym, shape=self.buffer.shape)
                lo = base.apply(*static, shape=self.buffer.shape)
                for ax in hi:
                    d = hi[ax] - lo.get(ax, 0)
                    if d != 0:
                        offset[ax] = from_sympy(d, table)
            self._layout = (lay, offset)
        return self._layout

    @property
    def layout(self) -> Layout:
        """The layout of the view (over its full rank, squeezed dimensions of extent 1 included)."""
        return self._compute()[0]

    @property
    def offset(self) -> dict:
        """Symbolic offset per axis added to :attr:`layout` (empty when every start is an int)."""
        return dict(self._compute()[1])


def _tile_part(layout):
    from tirxpy.layout import ComposeLayout

    return layout.tile_layout if isinstance(layout, ComposeLayout) else layout


def _viewed_layout(view, region):
    """``(layout, shape)`` of the tile ``view`` is sliced from: its buffer's, except that a dimension whose start
    is symbolic may run past the buffer's edge (a tile of 64 rows over a tensor of 20, whatever row it starts at).
    The layout then grows there by the same strides (the view's elements past the edge are addressed like the
    others; the primitives guard them: loads read 0, stores skip), which needs one memory (``m``) iterator per
    dimension, as every strided tensor has; other layouts are refused with an IRError naming the dimension."""
    from tirxpy.layout import TileLayout
    from tirxpy.layout.iters import Iter

    buf, shape = view.buffer, tuple(view.buffer.shape)
    need = [max(n, hi) for n, (_, hi) in zip(shape, region)]
    if need == list(shape):
        return buf.layout, shape
    lay = buf.layout
    if not (isinstance(lay, TileLayout) and not lay.replica and len(lay.shard) == len(shape)
            and all(it.extent == n and it.axis.name == "m" for it, n in zip(lay.shard, shape))):
        d = next(d for d, (n, k) in enumerate(zip(shape, need)) if k > n)
        raise IRError(f"dimension {d} of {buf.name}: a view of {region[d][1]} elements is longer than the "
                      f"{shape[d]} of {buf.name}, whose layout {shown(lay)} has no elements past its edge",
                      hint=f"view at most {shape[d]} elements of dimension {d} (a view larger than its tensor needs a "
                           "strided layout, one memory iterator per dimension)")
    grown = [Iter(k, it.stride, it.axis) for it, k in zip(lay.shard, need)]
    return TileLayout.from_iters(grown, (), lay.offset), tuple(need)


def slice_layout(layout, region, shape):
    """Layout of ``region`` (``[(start, stop)]``) of a tile of ``shape`` (the layout library's
    slice), as an IRError naming the view when the region is not representable."""
    try:
        return layout.slice(tuple(region), shape)
    except LayoutError as e:
        raise IRError(f"cannot view {region} of a tile {tuple(shape)} with layout {shown(layout)}: {e}") from None
