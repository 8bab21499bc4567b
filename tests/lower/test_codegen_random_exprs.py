"""Random integer expressions: what the generated C++ computes must be what the IR means.

Each case is a kernel whose statements store random expression trees over two per-thread values
``x``, ``y`` (``+ - *``, floor ``//`` and ``%`` by positive and negative constants, shifts, bit
operations, ``T.min`` / ``T.max``, ``T.select`` over comparisons joined by ``and`` / ``or`` /
``not``) and counts the trips of loops whose bound is such a tree. The reference evaluates the same
trees in Python (floor division, unbounded ints: values are kept far from int32 overflow).

- CPU: the kernel compiles with NVRTC, and the simulator (which runs the IR) agrees with Python.
- GPU: the compiled C++ agrees with Python. This is the check that would have caught a loop bound
  printed as ``i < c ? a : b`` (C++ reads ``(i < c) ? a : b``: a loop that never ends), which the
  simulator could not see.
"""
import random

import numpy as np
import pytest
import torch

import tirxpy
import tirxpy.intrinsics  # noqa: F401
from tirxpy import T


def _int(rng, depth):
    """(kernel source, python source) of a random int32 expression."""
    if depth == 0 or rng.random() < 0.15:
        leaf = rng.choice(["x", "y", str(rng.randint(-9, 9))])
        return leaf, leaf
    k = rng.randrange(11)
    if k == 0:
        (a, pa), (b, pb) = _int(rng, depth - 1), _int(rng, depth - 1)
        op = rng.choice(["+", "-", "&", "|", "^"])
        return f"({a} {op} {b})", f"({pa} {op} {pb})"
    if k == 1:
        a, pa = _int(rng, depth - 1)
        c = rng.choice([-9, -4, -3, -1, 2, 3, 7])
        return f"({a} * {c})", f"({pa} * {c})"
    if k in (2, 3):
        a, pa = _int(rng, depth - 1)
        c = rng.choice([-8, -7, -3, -2, -1, 1, 2, 3, 4, 5, 16])
        op = "//" if k == 2 else "%"
        return f"({a} {op} {c})", f"({pa} {op} {c})"
    if k == 4:
        a, pa = _int(rng, depth - 1)
        op, s = rng.choice(["<<", ">>"]), rng.randint(0, 3)
        return f"({a} {op} {s})", f"({pa} {op} {s})"
    if k == 5:
        (a, pa), (b, pb) = _int(rng, depth - 1), _int(rng, depth - 1)
        fn = rng.choice(["min", "max"])
        return f"T.{fn}({a}, {b})", f"{fn}({pa}, {pb})"
    if k == 6:
        a, pa = _int(rng, depth - 1)
        return f"(-{a})", f"(-{pa})"
    (c, pc), (a, pa), (b, pb) = _bool(rng, depth - 1), _int(rng, depth - 1), _int(rng, depth - 1)
    return f"T.select({c}, {a}, {b})", f"({pa} if {pc} else {pb})"


def _bool(rng, depth):
    k = rng.randrange(5) if depth > 0 else 0
    if k <= 2:
        (a, pa), (b, pb) = _int(rng, max(depth - 1, 0)), _int(rng, max(depth - 1, 0))
        op = rng.choice(["<", "<=", ">", ">=", "==", "!="])
        return f"({a} {op} {b})", f"({pa} {op} {pb})"
    if k == 3:
        (a, pa), (b, pb) = _bool(rng, depth - 1), _bool(rng, depth - 1)
        op = rng.choice(["and", "or"])
        return f"({a} {op} {b})", f"({pa} {op} {pb})"
    a, pa = _bool(rng, depth - 1)
    return f"(not {a})", f"(not {pa})"


def _case(seed, n_exprs, n_loops, threads, depth, loop_depth):
    """(kernel, python sources of the stored values, python sources of the loop bounds)."""
    rng = random.Random(seed)
    exprs = [_int(rng, depth) for _ in range(n_exprs)]
    loops = [_int(rng, loop_depth) for _ in range(n_loops)]
    lines = [
        "@T.prim_func",
        f"def rand_exprs(X: T.Tensor(({threads},), 'int32'), Y: T.Tensor(({threads},), 'int32'), "
        f"Out: T.Tensor(({threads}, {n_exprs + n_loops}), 'int32')):",
        f"    T.launch(grid=(1,), threads={threads})",
        "    t = T.thread_id()",
        "    x = X[t]",
        "    y = Y[t]",
        "    cnt = T.alloc_local((1,), 'int32')",
    ]
    for j, (e, _) in enumerate(exprs):
        lines.append(f"    Out[t, {j}] = {e}")
    for j, (e, _) in enumerate(loops):
        lines += ["    cnt[0] = 0", f"    for i in T.serial({e}):", "        cnt[0] = cnt[0] + 1",
                  f"    Out[t, {n_exprs + j}] = cnt[0]"]
    kernel = T.parse_script("\n".join(lines) + "\n")
    return kernel, [p for _, p in exprs], [p for _, p in loops]


def _reference(pys, loops, xs, ys):
    out = np.zeros((len(xs), len(pys) + len(loops)), np.int64)
    for i, (x, y) in enumerate(zip(xs.tolist(), ys.tolist())):
        env = {"x": x, "y": y}
        for j, p in enumerate(pys):
            out[i, j] = eval(p, {}, env)  # noqa: S307 - expressions generated above
        for j, p in enumerate(loops):
            out[i, len(pys) + j] = max(0, eval(p, {}, env))  # noqa: S307
    assert np.abs(out).max() < 2 ** 30, "a generated value came near int32 overflow; lower the depth"
    return out


def test_random_expressions_compile_and_the_simulator_agrees_with_python():
    from tirxpy.sim import run

    seed = random.randrange(2 ** 32)
    kernel, pys, loops = _case(seed, n_exprs=24, n_loops=3, threads=32, depth=4, loop_depth=1)
    tirxpy.compile(kernel, arch="sm_90a")
    rng = np.random.default_rng(seed)
    xs = rng.integers(-60, 61, 32).astype(np.int32)
    ys = rng.integers(-60, 61, 32).astype(np.int32)
    out = np.full((32, len(pys) + len(loops)), -12345, np.int32)
    res = run(kernel, xs, ys, out)
    ref = _reference(pys, loops, xs, ys)
    bad = np.argwhere(res[2] != ref)
    assert not len(bad), (f"seed {seed}: column {bad[0][1]} ({(pys + loops)[bad[0][1]]}) at x={xs[bad[0][0]]}, "
                          f"y={ys[bad[0][0]]}: sim {res[2][tuple(bad[0])]}, python {ref[tuple(bad[0])]}")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                    reason="built for sm_90a (Hopper)")
@pytest.mark.parametrize("round_", range(3))
def test_random_expressions_on_the_gpu_agree_with_python(round_):
    seed = random.randrange(2 ** 32)
    kernel, pys, loops = _case(seed, n_exprs=64, n_loops=8, threads=256, depth=4, loop_depth=2)
    ck = tirxpy.compile(kernel, arch="sm_90a")
    g = torch.Generator().manual_seed(seed)
    xs = torch.randint(-60, 61, (256,), generator=g, dtype=torch.int32)
    ys = torch.randint(-60, 61, (256,), generator=g, dtype=torch.int32)
    out = torch.full((256, len(pys) + len(loops)), -12345, dtype=torch.int32, device="cuda")
    ck(xs.cuda(), ys.cuda(), out)
    torch.cuda.synchronize()
    got = out.cpu().numpy()
    ref = _reference(pys, loops, xs.numpy(), ys.numpy())
    bad = np.argwhere(got != ref)
    assert not len(bad), (f"seed {seed}: column {bad[0][1]} ({(pys + loops)[bad[0][1]]}) at x={int(xs[bad[0][0]])}, "
                          f"y={int(ys[bad[0][0]])}: GPU {got[tuple(bad[0])]}, python {ref[tuple(bad[0])]}")
