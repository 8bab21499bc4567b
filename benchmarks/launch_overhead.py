"""Host launch overhead of an empty kernel: tirxpy vs Triton vs a tiny torch op (GPU machine).

    python benchmarks/launch_overhead.py [--launches 2000] [--reps 21]

Prints the median microseconds per launch over ``reps`` batches of ``launches`` launches
(host time to enqueue, synchronized once per batch), every path measured in interleaved rounds
after a one-second warm-up. Target: tirxpy <= 5 us.
"""
import argparse
import statistics
import time

import torch


def per_launch_us(fn, launches, reps):
    """Median host microseconds per launch over ``reps`` batches of ``launches`` launches."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(launches):
            fn()
        out.append((time.perf_counter() - t) / launches * 1e6)
        torch.cuda.synchronize()
    return statistics.median(out)


def interleaved_us(fns, launches, reps, warmup_s=1.0):
    """Per-launch medians of several launch paths, measured in interleaved rounds after a warm-up
    of about ``warmup_s`` seconds, so that no path is measured cold (clocks ramping up) or alone."""
    t_end = time.perf_counter() + warmup_s
    while time.perf_counter() < t_end:
        for fn in fns:
            for _ in range(100):
                fn()
        torch.cuda.synchronize()
    samples = [[] for _ in fns]
    for _ in range(reps):
        for i, fn in enumerate(fns):
            samples[i].append(per_launch_us(fn, launches, 1))
    return [statistics.median(s) for s in samples]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=21)
    a = ap.parse_args()
    from tirxpy.lower.nvrtc import compile_cuda
    from tirxpy.lower.runtime import ParamSpec, launch, load_module

    major, minor = torch.cuda.get_device_capability()
    arch = {9: "sm_90a", 10: "sm_100a"}.get(major, f"sm_{major}{minor}")
    src = 'extern "C" __global__ void empty() {}\nextern "C" __global__ void args3(float* x, float* y, int n) {}'
    mod = load_module(compile_cuda(src, arch))
    empty, args3 = mod.function("empty"), mod.function("args3")
    ln0 = empty.launcher([])
    lnb = empty.launcher([], backend="bindings")
    print(f"default launcher backend: {ln0.backend}")
    x, y = torch.zeros(1024, device="cuda"), torch.zeros(1024, device="cuda")
    ln3 = args3.launcher([ParamSpec("x", dtype="float32"), ParamSpec("y", dtype="float32"), ParamSpec("n", "scalar", "int32")])
    import tirxpy
    from tirxpy import T

    @T.prim_func
    def touch(X: T.Tensor((1024,), "float32")):
        T.launch(grid=(1,), threads=32)
        if T.thread_id() == 1024:
            X[0] = T.float32(1)

    ck = tirxpy.compile(touch, arch=arch)
    rows = [
        ("tirxpy empty (Launcher)", lambda: ln0(1, 32, ())),
        ("tirxpy empty (Launcher, bindings)", lambda: lnb(1, 32, ())),
        ("tirxpy empty (launch())", lambda: launch(empty, 1, 32, (), specs=())),
        ("tirxpy 3 args, checked", lambda: ln3(1, 32, (x, y, 1024))),
        ("tirxpy.compile(prim_func)(x)", lambda: ck(x)),
        ("tirxpy empty, cluster (2,1,1)", lambda: ln0(2, 32, (), cluster=(2, 1, 1))),
    ]
    try:
        import triton

        @triton.jit
        def _empty():
            pass

        rows.append(("triton empty", lambda: _empty[(1,)]()))
    except ImportError:
        rows.append(("triton empty", None))
    t = torch.zeros(1, device="cuda")
    rows.append(("torch t.add_(1) (1 element)", lambda: t.add_(1)))
    print(f"{'launch path':34s} {'us/launch (median)':>20s}")
    live = [(name, fn) for name, fn in rows if fn is not None]
    values = dict(zip((n for n, _ in live), interleaved_us([fn for _, fn in live], a.launches, a.reps)))
    for name, fn in rows:
        v = "n/a (not installed)" if fn is None else f"{values[name]:.2f}"
        print(f"{name:34s} {v:>20s}")
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
