"""Where the host time of one empty-kernel launch goes (GPU machine).

    python benchmarks/launch_breakdown.py

Times each piece of tirxpy's launch path on its own (median us per call over many calls):
the driver call through cuda-bindings vs through ctypes on libcuda, the torch stream lookup,
and argument packing. Used to choose the launcher's fast path; not a test.
"""
import ctypes
import torch
from launch_overhead import per_launch_us  # same timing loop (run from this folder or the repo root)


def per_call_us(fn, n=5000, reps=15):
    return per_launch_us(fn, n, reps)


def main():
    from cuda.bindings import driver as drv

    from tirxpy.lower.nvrtc import compile_cuda
    from tirxpy.lower.runtime import load_module

    mod = load_module(compile_cuda('extern "C" __global__ void empty() {}', "sm_90a"))
    k = mod.function("empty")
    ln = k.launcher([])
    stream = torch.cuda.current_stream().cuda_stream
    params = ln.packer.pack(())
    handle = k.handle
    lib = ctypes.CDLL("libcuda.so.1")
    f = lib.cuLaunchKernel
    u = ctypes.c_uint
    f.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    f.restype = ctypes.c_int
    h = int(handle)
    from tirxpy.lower.runtime import _launch_ex_ctypes, _make_config
    fx = _launch_ex_ctypes()
    fxc = lib.cuLaunchKernelEx
    fxc.argtypes, fxc.restype = [ctypes.c_void_p] * 4, ctypes.c_int
    cfg_keep = _make_config((1, 1, 1), (32, 1, 1), 0, stream, None)
    cfg_addr = cfg_keep[2]
    cu_stream = drv.CUstream(stream)
    raw = torch._C._cuda_getCurrentRawStream
    rows = [
        ("full Launcher call", lambda: ln(1, 32, ())),
        ("drv.cuLaunchKernel (bindings)", lambda: drv.cuLaunchKernel(handle, 1, 1, 1, 32, 1, 1, 0, stream, params, 0)),
        ("same, CUstream object reused", lambda: drv.cuLaunchKernel(handle, 1, 1, 1, 32, 1, 1, 0, cu_stream, params, 0)),
        ("cuLaunchKernel via ctypes", lambda: f(h, 1, 1, 1, 32, 1, 1, 0, stream, params, None)),
        ("cuLaunchKernelEx via ctypes (PyDLL)", lambda: fx(cfg_addr, h, params, None)),
        ("cuLaunchKernelEx via ctypes (CDLL)", lambda: fxc(cfg_addr, h, params, None)),
        ("torch raw stream lookup", lambda: raw(0)),
        ("ArgPacker.pack(())", lambda: ln.packer.pack(())),
    ]
    for name, fn in rows:
        print(f"{name:34s} {per_call_us(fn):8.2f} us")


if __name__ == "__main__":
    main()
