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

    with pytest.raises(JitError, match=r"argument x of type set does not hash \(TypeError\)"):
        f({1, 2})

    class Bomb(int):        # a __hash__ (and repr) of its own that raise: named by type
        def __hash__(self):
            raise ZeroDivisionError

        def __repr__(self):
            raise ZeroDivisionError

    with pytest.raises(JitError, match=r"argument x of type Bomb does not hash \(ZeroDivisionError\)"):
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


def _counting():
    calls = []

    @tirxpy.jit
    def f(x):
        calls.append(x)
        return ("kernel", len(calls))
    return f, calls


class Key:
    """A dict key that prints alike whatever its value (tests/fuzz/test_core.py draws it too)."""

    def __init__(self, v):
        self.v = v

    def __repr__(self):
        return "Key"

    def __hash__(self):
        return hash(self.v)

    def __eq__(self, other):
        return isinstance(other, Key) and other.v == self.v


def test_dict_keys_that_print_alike_are_different_arguments():
    f, calls = _counting()
    assert f({Key(1): 0}) != f({Key(2): 0}) and len(calls) == 2
    assert f({Key(1): 0, "a": 1}) is f({"a": 1, Key(1): 0}) and len(calls) == 3     # dict order: one key


def test_floats_key_bit_for_bit():
    np = pytest.importorskip("numpy")
    f, calls = _counting()
    assert f(0.0) != f(-0.0) and f(np.float32(0.0)) != f(np.float32(-0.0)) and f(0j) != f(complex(0.0, -0.0))
    n = len(calls)
    assert f(float("nan")) is f(float("nan")) and f(1.5) is f(1.5) and len(calls) == n + 2


def test_shared_structure_is_counted_not_walked_forever():
    dag = []
    for _ in range(30):
        dag = [dag, dag]        # 2**30 leaves through 30 shared lists (within the depth limit)
    with pytest.raises(JitError, match="more than 100000 items"):
        make_copy(dag)


def test_an_argument_whose_eq_raises_is_refused_at_the_cache():
    class Eq:
        def __hash__(self):
            return 7

        def __eq__(self, other):
            raise RuntimeError("no compare")

    f, calls = _counting()
    f(Eq())
    with pytest.raises(JitError, match=r"comparing the arguments with a cached call raised RuntimeError"):
        f(Eq())


def test_an_argument_with_a_hostile_getattr_keys_by_value():
    class Odd:
        def __getattr__(self, name):
            raise RuntimeError(name)

    f, calls = _counting()
    a = Odd()
    assert f(a) is f(a) and len(calls) == 1


def test_a_factory_returning_none_is_cached():
    f, calls = _counting()
    g = tirxpy.jit(lambda x: calls.append(x))
    assert g(1) is None and g(1) is None and calls == [1] and g.builds == 1


def test_tensors_key_by_shape_strides_dtype_and_device_not_values():
    """A factory may read a tensor's layout (a strided view's kernel differs from a contiguous one's): tensors of one
    shape and dtype but other strides or another device get their own build; equal layouts share one, whatever the
    values."""
    torch = pytest.importorskip("torch")
    seen = []
    f = tirxpy.jit(lambda t: seen.append(t.stride()) or t.stride())
    a = torch.zeros(4, 6)
    assert f(a) == (6, 1) and f(torch.ones(4, 6)) == (6, 1) and f.builds == 1
    assert f(torch.zeros(6, 4).t()) == (1, 4) and f.builds == 2
    assert f(torch.zeros(4, 6, dtype=torch.float16)) == (6, 1) and f.builds == 3
    assert f(torch.zeros(4, 6, device="meta")) == (6, 1) and f.builds == 4
    assert f(a[:, :6]) == (6, 1) and f.builds == 4           # a view of the same layout
    assert seen == [(6, 1), (1, 4), (6, 1), (6, 1)]
