"""tirxpy/lower/codegen/ranges.py: integer ranges of index expressions (interval arithmetic)."""
import itertools

from tirxpy.ir import ScopeId, Var, ops
from tirxpy.lower.codegen.ranges import Ranges


def _brute(f, *rngs):
    vals = [f(*xs) for xs in itertools.product(*[range(lo, hi + 1) for lo, hi in rngs])]
    return min(vals), max(vals)


def test_hardware_ids_follow_the_cta_size():
    r = Ranges(threads=256, cluster_size=2)
    assert r.of(ScopeId("lane_id")) == (0, 31)
    assert r.of(ScopeId("warp_id")) == (0, 7)
    assert r.of(ScopeId("warpgroup_id")) == (0, 1)
    assert r.of(ScopeId("thread_id")) == (0, 255)
    assert r.of(ScopeId("cluster_rank")) == (0, 1)
    assert Ranges(threads=16).of(ScopeId("lane_id")) == (0, 15)


def test_unbound_and_unsigned_vars():
    r = Ranges()
    assert r.of(Var("n")) is None and not r.nonneg(Var("n"))
    assert r.of(Var("u", "uint32")) == (0, 2**32 - 1)


def test_arithmetic_is_the_exact_interval_for_single_use_vars():
    r = Ranges()
    i, j = Var("i"), Var("j")
    r.bind(i, (-3, 5))
    r.bind(j, (2, 4))
    assert r.of(ops.add(i, j)) == _brute(lambda a, b: a + b, (-3, 5), (2, 4))
    assert r.of(ops.sub(i, j)) == _brute(lambda a, b: a - b, (-3, 5), (2, 4))
    assert r.of(ops.mul(i, j)) == _brute(lambda a, b: a * b, (-3, 5), (2, 4))
    assert r.of(ops.minimum(i, j)) == _brute(min, (-3, 5), (2, 4))
    assert r.of(ops.maximum(i, j)) == _brute(max, (-3, 5), (2, 4))
    assert r.of(ops.floordiv(i, 2)) == _brute(lambda a: a // 2, (-3, 5))
    assert r.of(ops.shl(j, 3)) == (16, 32)
    assert r.of(ops.shr(j, 1)) == (1, 2)
    assert not r.nonneg(i) and r.nonneg(j)


def test_floormod_and_bitand():
    r = Ranges()
    i, j = Var("i"), Var("j")
    r.bind(i, (0, 100))
    r.bind(j, (0, 5))
    assert r.of(ops.floormod(i, 8)) == (0, 7)
    assert r.of(ops.floormod(j, 8)) == (0, 5)       # already below the modulus
    assert r.of(ops.bitand(i, 15)) == (0, 15)
    assert r.of(ops.bitand(j, 15)) == (0, 5)
    assert r.of(ops.bitand(i, j)) == (0, 100)        # non-constant mask of a non-negative value
    lo, hi = r.of(ops.bitor(j, 8))
    assert lo == 0 and hi >= 13
    assert r.of(ops.floordiv(i, Var("k"))) is None


def test_select_and_bind_none():
    r = Ranges()
    i, c = Var("i"), Var("c", "bool")
    r.bind(i, (1, 3))
    r.bind(Var("x"), None)
    assert r.of(ops.select(c, i, ops.const(10))) == (1, 10)
