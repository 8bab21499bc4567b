"""Active thread sets: which threads of a CTA execute a statement.

A :class:`ThreadSet` is the exact set of CTA-local thread indices (``tx``) that run a
statement, as narrowed by warp-role branches and ``T.elect_one()``. It answers with a layout
over the thread axes (:meth:`ThreadSet.layout`) and the widest scope whose units it covers
whole (:meth:`ThreadSet.scope`), which is what a primitive at that scope needs.

    >>> from tirxpy.scope import ThreadSet
    >>> cta = ThreadSet.full(256)
    >>> cta.layout()
    TileLayout(S[(8, 32) : (1@warpid, 1@laneid)])
    >>> wg1 = cta.filter(lambda t: t // 128 == 1)
    >>> wg1.layout(), wg1.scope()
    (TileLayout(S[(4, 32) : (1@warpid, 1@laneid)] + 4@warpid), <Scope.WARPGROUP: 2>)
    >>> one = wg1.elect_one()
    >>> one.layout(), one.scope(), one.describe()
    (TileLayout(S[1 : 1@laneid] + 4@warpid), <Scope.THREAD: 0>, '1 thread (warp 4, lane 0)')
"""
from __future__ import annotations

from tirxpy.layout import TileLayout
from tirxpy.errors import shown

from .errors import ScopeError
from .scopes import Scope


def _progression(vals):
    """(start, count, step) when the sorted values are an arithmetic progression, else None."""
    vals = sorted(vals)
    if len(vals) == 1:
        return vals[0], 1, 1
    step = vals[1] - vals[0]
    if all(b - a == step for a, b in zip(vals, vals[1:])):
        return vals[0], len(vals), step
    return None


def _ranges(vals) -> str:
    vals = sorted(vals)
    out, i = [], 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        out.append(str(vals[i]) if i == j else f"{vals[i]}..{vals[j]}")
        i = j + 1
    return ", ".join(out)


class ThreadSet:
    """The threads of one CTA (``threads_per_cta`` of them) that execute a statement.

    ``exact`` is False when a branch condition depends on run-time data as well as on thread
    ids: the set is then an upper bound. ``grain`` says what is still known then: the threads that
    run are whole units of that scope of the upper bound (a condition on ``T.warpgroup_id()`` and
    run-time data keeps or drops whole warpgroups; ``Scope.THREAD``: nothing is known).
    ``cta_narrowed`` is True under a branch on CTA or cluster ids (only some CTAs run the statement).
    """

    __slots__ = ("threads_per_cta", "tids", "exact", "cta_narrowed", "grain")

    def __init__(self, threads_per_cta: int, tids, exact: bool = True, cta_narrowed: bool = False,
                 grain: Scope = Scope.THREAD):
        if not isinstance(threads_per_cta, int) or not 1 <= threads_per_cta <= 1024:
            raise ScopeError(f"threads per CTA must be an int in [1, 1024], got {shown(threads_per_cta)}")
        self.threads_per_cta = threads_per_cta
        self.tids = frozenset(tids)
        self.exact = bool(exact)
        self.cta_narrowed = bool(cta_narrowed)
        self.grain = Scope.get(grain)

    @classmethod
    def full(cls, threads_per_cta: int) -> "ThreadSet":
        """Every thread of the CTA."""
        return cls(threads_per_cta, range(threads_per_cta))

    def _with(self, tids=None, exact=None, cta_narrowed=None, grain=None) -> "ThreadSet":
        return ThreadSet(
            self.threads_per_cta,
            self.tids if tids is None else tids,
            self.exact if exact is None else exact,
            self.cta_narrowed if cta_narrowed is None else cta_narrowed,
            self.grain if grain is None else grain,
        )

    def filter(self, pred) -> "ThreadSet":
        """The threads for which ``pred(tx)`` is true."""
        return self._with(tids=[t for t in self.tids if pred(t)])

    def intersect(self, other: "ThreadSet") -> "ThreadSet":
        grain = min(s.grain if not s.exact else Scope.KERNEL for s in (self, other))
        return self._with(tids=self.tids & other.tids, exact=self.exact and other.exact,
                          cta_narrowed=self.cta_narrowed or other.cta_narrowed,
                          grain=grain if grain is not Scope.KERNEL else Scope.THREAD)

    def minus(self, other: "ThreadSet") -> "ThreadSet":
        return self._with(tids=self.tids - other.tids)

    def inexact(self, grain=Scope.THREAD) -> "ThreadSet":
        """The same set marked as an upper bound (a data-dependent branch narrowed it further), made of
        whole units of ``grain`` (and of this set's grain, if it already was an upper bound).

            >>> s = ThreadSet(384, range(128, 384)).inexact("warpgroup")
            >>> s.whole("warpgroup"), s.whole("warp"), s.inexact().whole("warp")
            (True, True, False)
        """
        grain = Scope.get(grain)
        return self._with(exact=False, grain=grain if self.exact else min(grain, self.grain))

    def narrow_ctas(self) -> "ThreadSet":
        return self._with(cta_narrowed=True)

    def elect_one(self) -> "ThreadSet":
        """One issuing thread: the lowest-numbered active thread (lane 0 of the first active warp
        when that warp is whole, as ``elect.sync`` picks)."""
        return self._with(tids=[min(self.tids)] if self.tids else [])

    # ---- queries ----
    def __len__(self) -> int:
        return len(self.tids)

    def __contains__(self, tid) -> bool:
        return tid in self.tids

    def __eq__(self, other):
        return (isinstance(other, ThreadSet) and self.tids == other.tids and self.exact == other.exact
                and self.threads_per_cta == other.threads_per_cta and self.cta_narrowed == other.cta_narrowed
                and self.grain == other.grain)

    def __hash__(self):
        return hash((self.tids, self.exact, self.threads_per_cta))

    def warps(self) -> dict:
        """Active lanes per active warp: ``{warp: frozenset(lanes)}``."""
        out: dict = {}
        for t in self.tids:
            out.setdefault(t // 32, set()).add(t % 32)
        return {w: frozenset(v) for w, v in sorted(out.items())}

    def covers(self, scope) -> bool:
        """True when the set is a union of whole units of ``scope`` (and, for cluster scope,
        every CTA runs it)."""
        scope = Scope.get(scope)
        if not self.tids:
            return False
        if scope is Scope.THREAD:
            return True
        if scope is Scope.WARP:
            n = self.threads_per_cta
            return all(lanes == frozenset(range(min(32, n - 32 * w))) for w, lanes in self.warps().items())
        if scope is Scope.WARPGROUP:
            n = self.threads_per_cta
            groups = {t // 128 for t in self.tids}
            return all(
                all(t in self.tids for t in range(128 * g, min(128 * g + 128, n))) and 128 * g + 128 <= n for g in groups
            )
        whole = len(self.tids) == self.threads_per_cta
        if scope is Scope.CTA:
            return whole
        return whole and not self.cta_narrowed

    def whole(self, scope) -> bool:
        """True when the threads that run are certainly a union of whole units of ``scope``: the set
        covers them (:meth:`covers`) and, for an upper bound, its ``grain`` is at least that scope."""
        scope = Scope.get(scope)
        return self.covers(scope) and (self.exact or self.grain >= scope)

    def scope(self) -> Scope:
        """The widest scope (up to ``CTA``) whose units the set covers whole (``THREAD`` for a single thread)."""
        best = Scope.THREAD
        for s in (Scope.WARP, Scope.WARPGROUP, Scope.CTA):
            if self.covers(s):
                best = s
        return best

    def layout(self) -> TileLayout | None:
        """The set as a layout over ``(warpid, laneid)``; ``None`` when it is empty or not a
        product of two arithmetic progressions (then read :attr:`tids`)."""
        ws = self.warps()
        if not ws:
            return None
        lanes = set(ws.values())
        if len(lanes) != 1:
            return None
        pw, pl = _progression(ws), _progression(next(iter(lanes)))
        if pw is None or pl is None:
            return None
        (w0, nw, sw), (l0, nl, sl) = pw, pl
        its = [(nw, sw, "warpid")] if nw > 1 else []
        its.append((nl, sl, "laneid"))
        from tirxpy.layout import Iter

        shard = [Iter(e, s, a) for e, s, a in its]
        return TileLayout.from_iters(shard, (), {"warpid": w0, "laneid": l0})

    def describe(self) -> str:
        """A short human description: ``'warps 4..7'``, ``'1 thread (warp 0, lane 0)'``."""
        if not self.tids:
            return "no threads"
        ws = self.warps()
        pre = "" if self.exact else "at most "
        if len(self.tids) == 1:
            t = next(iter(self.tids))
            return f"{pre}1 thread (warp {t // 32}, lane {t % 32})"
        if len(self.tids) == self.threads_per_cta:
            return f"{pre}the whole CTA ({self.threads_per_cta} threads)"
        if self.covers(Scope.WARP):
            return f"{pre}warps {_ranges(ws)}"
        return f"{pre}{len(self.tids)} threads (warps {_ranges(ws)}, some lanes)"

    def __repr__(self) -> str:
        return f"ThreadSet({self.describe()})"


def full_cta_layout(threads_per_cta: int) -> TileLayout:
    """``S[(nwarps, 32) : (1@warpid, 1@laneid)]`` for a CTA of ``threads_per_cta`` threads."""
    lay = ThreadSet.full(threads_per_cta).layout()
    if lay is not None:
        return lay
    from tirxpy.layout import Iter

    return TileLayout.from_iters([Iter(threads_per_cta, 1, "tx")])
