"""Fuzz cases for tirxpy.lang: rings, warp roles, barrier set-up and schedulers given bad arguments inside
and outside a kernel get a typed error naming the argument; good arguments near the edges give the
right walk."""
from harness import EXAMPLES, HOSTILE, accept, refuse
from hypothesis import given, settings
from hypothesis import strategies as st

from tirxpy import T
from tirxpy.lang import StageRing, WarpRoles, grouped_tile, register_split, setup_barriers, split_tile

FUZZ = settings(max_examples=EXAMPLES, deadline=None)
JUNK = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=4),
                 st.integers(-2**70, 2**70), st.lists(st.integers(0, 3), max_size=3), HOSTILE)


def _ring_kernel(full_shape, full_dtype, stages, cluster):
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            T.launch(grid=(1,), threads=32)
            full = T.alloc_shared(full_shape, full_dtype)
            empty = T.alloc_shared((8,), "uint64")
            ring = StageRing(full, empty, stages, cluster)
            ring.wait_full(T.thread_id())
        return k
    return build


@FUZZ
@given(stages=JUNK | st.integers(-1, 10), cluster=JUNK | st.integers(-1, 20))
def test_ring_counts_that_are_not_positive_ints_are_refused(stages, cluster):
    good = lambda v, hi: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= hi  # noqa: E731
    if good(stages, 8) and good(cluster, 16):       # (8 barriers; clusters of up to 16 CTAs on sm_90 / sm_100)
        return
    refuse("lang", _ring_kernel((8,), "uint64", stages, cluster), names=["stages", "cluster"])


@FUZZ
@given(shape=st.sampled_from([(8,), (2,), (4, 2), (1,)]), dtype=st.sampled_from(["uint64", "uint32", "float32"]),
       stages=st.integers(1, 8))
def test_barrier_buffers_must_hold_the_ring(shape, dtype, stages):
    ok = dtype == "uint64" and len(shape) == 1 and shape[0] >= stages
    if ok:
        accept("lang", _ring_kernel(shape, dtype, stages, 1), lambda k: "mbarrier_wait_parity" in str(k))
    else:
        refuse("lang", _ring_kernel(shape, dtype, stages, 1), names=["full", "barrier", "stages"])


@FUZZ
@given(threads=JUNK | st.integers(0, 2048), dec=JUNK | st.integers(0, 300), inc=JUNK | st.integers(0, 300))
def test_register_splits_are_checked_in_closed_form(threads, dec, inc):
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (threads, dec, inc))
    fits = ints and threads % 128 == 0 and 256 <= threads <= 1024 and all(24 <= v <= 256 and v % 8 == 0 for v in (dec, inc)) \
        and 128 * dec + (threads - 128) * inc <= threads * min(65536 // threads // 8 * 8, 248)
    if fits:
        accept("lang", lambda: WarpRoles(threads, dec, inc), lambda r: r.consumers == threads // 128 - 1)
    else:
        refuse("lang", lambda: register_split(threads, dec, inc), names=["setmaxnreg", "warpgroups", "registers"])


@FUZZ
@given(item=st.one_of(JUNK, st.tuples(JUNK, JUNK)))
def test_setup_barriers_takes_ring_triples_only(item):
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            T.launch(grid=(1,), threads=32)
            setup_barriers([item], 1, False)
        return k
    refuse("lang", build, names=["ring", "full_arrivals"])


@FUZZ
@given(num_m=st.integers(1, 12), num_n=st.integers(1, 12), group=st.integers(1, 6))
def test_the_grouped_walk_is_a_bijection(num_m, num_n, group):
    accept("lang", lambda: sorted(grouped_tile(t, num_m, num_n, group) for t in range(num_m * num_n)),
           lambda v: v == [(m, n) for m in range(num_m) for n in range(num_n)])


@FUZZ
@given(rows=st.integers(1, 4), wide=st.integers(0, 3), narrow=st.integers(1, 3), extra=st.integers(0, 3),
       group=st.integers(1, 3))
def test_the_split_walk_lists_each_tile_once(rows, wide, narrow, extra, group):
    bn, bn2 = 128, 64
    num_m, num_n = rows + extra, wide + (narrow * bn2 + bn - 1) // bn
    total = rows * (wide + narrow) + extra * num_n

    def walk():
        return sorted((m, n0) for m, n0, _ in (split_tile(t, num_m, num_n, group, (rows, wide, narrow, bn2), bn)
                                               for t in range(total)))
    want = sorted([(m, w * bn) for m in range(rows) for w in range(wide)]
                  + [(m, wide * bn + j * bn2) for m in range(rows) for j in range(narrow)]
                  + [(m, n * bn) for m in range(rows, num_m) for n in range(num_n)])
    accept("lang", walk, lambda v: v == want)


class _RaisingIndex:
    """A hostile int stand-in: its own ``__index__`` raises."""

    def __index__(self):
        raise RuntimeError("no index")


def test_ring_counts_whose_index_raises_are_refused():
    refuse("lang", _ring_kernel((8,), "uint64", _RaisingIndex(), 1), names=["stages"])
    refuse("lang", _ring_kernel((8,), "uint64", 2, _RaisingIndex()), names=["cluster"])
