import pytest

import tirxpy
from tirxpy import T
from tirxpy.jit import JitError
from tirxpy.ir import Kernel


@tirxpy.jit
def make_copy(n, dtype="float32", block=128):
    @T.prim_func
    def copy(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        T.launch(grid=(n // block,), threads=block)
        i = T.cta_id(0) * block + T.thread_id()
        B[i] = A[i]

    return copy


def test_builds_once_per_specialization():
    make_copy.cache_clear()
    before = make_copy.builds
    k1 = make_copy(1024)
    k2 = make_copy(1024, "float32")
    k3 = make_copy(n=1024, block=128)
    assert isinstance(k1, Kernel) and k1 is k2 is k3 and make_copy.builds == before + 1
    k4 = make_copy(1024, "bfloat16", block=256)
    assert k4 is not k1 and k4.params[0].dtype.name == "bfloat16" and k4.launch.threads == 256
    assert make_copy.builds == before + 2 and len(make_copy.cache) == 2
    assert make_copy.__name__ == "make_copy" and "make_copy" in repr(make_copy)


def test_key_distinguishes_types():
    calls = []

    @tirxpy.jit
    def f(x):
        calls.append(x)
        return x

    f(1), f(1.0), f(True), f((1, 2)), f([1, 2]), f((1, 2))
    assert calls == [1, 1.0, True, (1, 2), [1, 2]]


def test_unhashable_and_bad_arguments():
    @tirxpy.jit
    def f(x):
        return x

    with pytest.raises(JitError, match=r"argument of type set does not hash \(TypeError\)"):
        f({1, 2})

    class Bomb(int):        # a __hash__ (and repr) of its own that raise: named by type
        def __hash__(self):
            raise ZeroDivisionError

        def __repr__(self):
            raise ZeroDivisionError

    with pytest.raises(JitError, match=r"argument of type Bomb does not hash \(ZeroDivisionError\)"):
        f(Bomb(3))
    with pytest.raises(JitError, match="missing a required argument"):
        f()
    with pytest.raises(JitError, match="decorates a function"):
        tirxpy.jit(5)


def test_self_containing_or_deeply_nested_arguments_cannot_key_the_cache():
    loop = [1]
    loop.append(loop)
    deep = 1
    for _ in range(40):
        deep = (deep,)
    for arg in (loop, deep, {"a": loop}):
        with pytest.raises(JitError, match="more than 32 deep"):
            make_copy(arg)
    ok = 1
    for _ in range(30):
        ok = (ok,)
    assert make_copy.key(ok)[0][0] == "n"
