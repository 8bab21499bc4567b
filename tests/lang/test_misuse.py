"""Misuse of tirxpy.lang: what can be known while the kernel is built is a LangError naming the argument and the
fix; what only shows at run time is a simulator report. Never a silent wrong answer, never a Python error from
inside the helpers."""
import numpy as np
import pytest

from tirxpy import T, sim
from tirxpy.ir.errors import ParseError
from tirxpy.lang import LangError, StageRing, WarpRoles, setup_barriers

from .ring_kernels import ring_copy


def _kernel(body, *args, stages=2, threads=64, cluster=None):
    """A kernel with a ``(stages,)`` pair of barrier buffers ``full`` / ``empty`` (and ``extra``) whose body is the
    macro ``body(full, empty, extra, *args)``."""
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        T.launch(grid=(cluster or 1,), threads=threads, cluster=(cluster,) if cluster else None)
        full = T.alloc_shared((stages,), "uint64")
        empty = T.alloc_shared((stages,), "uint64")
        extra = T.alloc_shared((stages,), "uint64")
        body(full, empty, extra, *args)
    return k


@T.macro
def _setup(full, empty, extra, nf, ne, cluster, pdl, ring_cluster):
    ring = StageRing(full, empty, 2, ring_cluster)
    setup_barriers([(ring, nf, ne)], cluster, pdl)


def _lang_error(match, body, *args, **kw):
    """Building the kernel fails with ``match``: a LangError inside a kernel reaches the caller as a ParseError
    located at the kernel line (and the macro call) that raised it."""
    with pytest.raises(ParseError, match=match):
        _kernel(body, *args, **kw)


# ---------------------------------------------------------------- StageRing arguments
def test_stages_and_cluster_take_any_integer_and_name_the_type_of_anything_else():
    ring = StageRing.__new__(StageRing)
    with pytest.raises(LangError, match=r"stages must be an int >= 1, got 2\.0 \(float\)"):
        StageRing.__init__(ring, None, None, 2.0)
    with pytest.raises(LangError, match=r"stages must be an int >= 1, got 0 \(int\)"):
        StageRing.__init__(ring, None, None, 0)

    assert "T.ptx.mbarrier_wait_parity(full[1], 1)" in str(_kernel(_np_ints, np.int64(2), np.int32(1)))


@T.macro
def _np_ints(full, empty, extra, stages, cluster):
    ring = StageRing(full, empty, stages, cluster)
    ring.wait_full(3)


@T.macro
def _same_buffer(full, empty, extra):
    ring = StageRing(full, full, 2)


def test_full_and_empty_must_be_two_buffers():
    _lang_error(r"full and empty are the same buffer 'full'.*allocate two", _same_buffer)


@T.macro
def _cluster_ring(full, empty, extra, cluster):
    ring = StageRing(full, empty, 2, cluster)


def test_a_cluster_ring_must_match_the_launch_cluster():
    _lang_error(r"cluster = 2 CTAs, but the kernel is launched with clusters of 1 CTA", _cluster_ring, 2)
    _lang_error(r"cluster = 2 CTAs, but the kernel is launched with clusters of 4 CTA", _cluster_ring, 2, cluster=4)
    assert "cluster=(2,)" in str(_kernel(_cluster_ring, 2, cluster=2))
    assert "cluster=(2,)" in str(_kernel(_cluster_ring, 1, cluster=2))     # a CTA-local ring in a cluster kernel


@T.macro
def _at(full, empty, extra, what, g):
    ring = StageRing(full, empty, 2)
    if what == "wait_full":
        ring.wait_full(g)
    elif what == "wait_empty":
        ring.wait_empty(g)
    elif what == "release":
        ring.release(g)
    elif what == "arrive_full":
        ring.arrive_full(g)
    else:
        ring.expect_bytes(g, 128)


@pytest.mark.parametrize("what", ["wait_full", "wait_empty", "release", "arrive_full", "expect_bytes"])
@pytest.mark.parametrize("g, msg", [
    (-1, r"position -1: positions count from 0"),
    (1.5, r"position 1\.5 \(float\) must be an int or an integer device expression"),
    ("a", r"position 'a' \(str\) must be an int"),
])
def test_a_position_is_a_natural_number(what, g, msg):
    _lang_error(f"StageRing.{what}: {msg}", _at, what, g)


@T.macro
def _release_to(full, empty, extra, rank):
    ring = StageRing(full, empty, 2, 2)
    ring.release_to(0, rank)


@pytest.mark.parametrize("rank", [2, -1])
def test_release_to_a_rank_outside_the_cluster_is_refused(rank):
    _lang_error(rf"release_to: rank {rank} is not a CTA of the ring's cluster of 2 \(ranks 0\.\.1\)",
                _release_to, rank, cluster=2)
    assert "mapa_shared(empty[0], 1)" in str(_kernel(_release_to, 1, cluster=2))


@T.macro
def _init(full, empty, extra, nf, ne):
    ring = StageRing(full, empty, 2)
    ring.init(nf, ne)


@pytest.mark.parametrize("nf, ne, msg", [
    (0, 1, r"full_arrivals = 0"), (1, -3, r"empty_arrivals = -3"), (1, 2**20, r"empty_arrivals = 1048576"),
    (1.0, 1, r"full_arrivals = 1\.0 \(float\)"), (True, 1, r"full_arrivals = True \(bool\)"),
])
def test_init_checks_arrival_counts(nf, ne, msg):
    _lang_error(msg + r".*an mbarrier expects 1 to 1048575 arrivals a phase", _init, nf, ne)


# ---------------------------------------------------------------- setup_barriers arguments
@pytest.mark.parametrize("nf, ne, msg", [
    (0, 1, r"full_arrivals = 0"), (1, -1, r"empty_arrivals = -1"), (1, 2**20, r"empty_arrivals = 1048576"),
    (1.5, 1, r"full_arrivals = 1\.5 \(float\)"), ("x", 1, r"full_arrivals = 'x' \(str\)"),
])
def test_setup_checks_arrival_counts(nf, ne, msg):
    _lang_error(r"setup_barriers: ring StageRing\(full, empty.*" + msg, _setup, nf, ne, 1, False, 1)


@pytest.mark.parametrize("cluster, pdl, msg", [
    (0, False, r"cluster must be an int in \[1, 16\], got 0"),
    ("a", False, r"cluster must be an int in \[1, 16\], got 'a'"),
    (1, 3, r"pdl must be True or False, got 3"),
])
def test_setup_checks_cluster_and_pdl(cluster, pdl, msg):
    _lang_error(r"setup_barriers: " + msg, _setup, 1, 1, cluster, pdl, 1)


def test_setup_cluster_must_match_the_launch_and_the_rings():
    # a cluster ring whose barriers only the CTA syncs: a peer's release could reach an uninitialised barrier
    _lang_error(r"setup_barriers: ring StageRing\(full, empty, stages=2, cluster=2\) is released across a cluster "
                r"of 2 CTAs; pass cluster=2", _setup, 1, 1, 1, False, 2, cluster=2)
    _lang_error(r"setup_barriers: cluster = 2, but the kernel is launched with clusters of 1 CTA", _setup,
                1, 1, 2, False, 1)
    text = str(_kernel(_setup, 1, 1, 2, False, 2, cluster=2))
    assert "T.ptx.cluster_sync()" in text


@T.macro
def _rings_as(full, empty, extra, how):
    ring = StageRing(full, empty, 2)
    other = StageRing(extra, empty, 2)
    if how == "bare ring":
        setup_barriers(ring, 1, False)
    elif how == "twice":
        setup_barriers([(ring, 1, 1), (ring, 1, 1)], 1, False)
    elif how == "shared buffer":
        setup_barriers([(ring, 1, 1), [(other, 1, 1)]], 1, False)
    else:
        setup_barriers(how, 1, False)


@pytest.mark.parametrize("how, msg", [
    ("bare ring", r"rings is a list of \(ring, full_arrivals, empty_arrivals\) triples.*got StageRing\(full"),
    (3, r"rings is a list of \(ring, full_arrivals, empty_arrivals\) triples.*got 3"),
    ("twice", r"barrier buffer 'full' is listed twice"),
    ("shared buffer", r"barrier buffer 'empty' is listed twice"),
])
def test_setup_refuses_a_malformed_list_and_barriers_initialised_twice(how, msg):
    _lang_error(r"setup_barriers: " + msg, _rings_as, how)


# ---------------------------------------------------------------- WarpRoles against the launch
@T.macro
def _roles(full, empty, extra, roles):
    if T.warpgroup_id() == 0:
        roles.enter_producer()
    else:
        roles.enter_consumer()


def test_roles_for_more_or_fewer_warpgroups_than_the_launch_are_refused():
    _lang_error(r"WarpRoles\(threads=512, .*\) in a kernel launched with 384 threads.*WarpRoles\(384, ",
                _roles, WarpRoles(512, 32, 160), threads=384)
    _lang_error(r"launched with 512 threads", _roles, WarpRoles(384, 40, 232), threads=512)
    assert "setmaxnreg_inc(232)" in str(_kernel(_roles, WarpRoles(384, 40, 232), threads=384))


# ---------------------------------------------------------------- protocol errors: simulator reports
def _sim_problems(k, consumers, n, seed=0):
    a = np.random.default_rng(seed).random(n * 32, dtype=np.float32)
    b = np.full((consumers, n * 32), np.nan, np.float32)
    return {p.kind for p in sim.run(k, a, b, check=False, seed=seed).problems}


@pytest.mark.parametrize("knobs, consumers, kinds", [
    (dict(skip_release=True), 1, {"deadlock"}),                    # the producer waits for a release forever
    (dict(release_twice=True), 1, {"deadlock"}),                   # the second release completes the next phase
    (dict(wrong_parity=True), 1, {"deadlock"}),                    # the consumer waits for a phase that never comes
    (dict(empty_arrivals=64), 1, {"deadlock", "mbarrier_unbalanced"}),    # counts for two consumers, one arrives
    (dict(empty_arrivals=32), 2, {"deadlock"}),                    # counts for one consumer, two arrive
    (dict(producer_waits_full=True), 1, {"deadlock"}),             # the producer calls the consumer's wait
])
def test_protocol_errors_are_reported_by_the_simulator(knobs, consumers, kinds):
    k = ring_copy(2, 1, 6, consumers, **knobs)
    assert kinds <= _sim_problems(k, consumers, 6)


def test_a_consumer_that_skips_a_full_wait_reads_a_stage_being_written():
    """Skipping the wait at ``g`` breaks the precondition of the wait at ``g + stages`` (its waiter saw phase
    ``r - 1`` complete): the barrier may still be in phase ``r - 1``, whose parity passes the wait at once."""
    k = ring_copy(2, 1, 8, 1, skip_full_wait=True)
    kinds = set()
    for seed in range(4):
        kinds |= _sim_problems(k, 1, 8, seed)
    assert "race" in kinds
