"""Where the CTAs of a one-CTA-per-SM launch land, and which concurrent L2 reads the H100 merges (GPU machine).

    python benchmarks/tpc_coalescing.py             # placement, max active clusters, bandwidth by sharing
    ncu --clock-control none -k stream --launch-skip 2 --launch-count 1 --metrics \\
    lrc__request_sectors_op_read_coalescable.sum,lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum \\
        python benchmarks/tpc_coalescing.py --mode 1   # what the L2 request coalescer merged in one mode

Four probes, each a small CUDA kernel compiled with NVRTC:

1. **Placement**: every CTA of a launch of one CTA per SM (200 KB of dynamic shared memory each, 384 threads,
   like the GEMM) writes its ``%smid``; printed for a plain launch and for clusters of 2, with the number of
   CTA pairs ``(2j, 2j + 1)`` that sit on one TPC (SMs ``2t, 2t + 1``).
2. **Max active clusters** of 1 / 2 / 4 / 8 such CTAs (``cuOccupancyMaxActiveClusters``).
3. **Bandwidth by sharing**: each CTA streams the 256 KB region picked by its SM 64 times from the L2 (one
   thread, 16 KB bulk copies into four shared-memory buffers on mbarriers): mode 0 every SM its own region,
   1 the two SMs of a TPC (``smid // 2``) one region, 2 two SMs far apart (``smid % (SMs / 2)``), 3 four SMs
   (``smid // 4``: two TPCs). Printed: the best of 5 times and the bytes the SMs received per second.
4. **Placement under programmatic dependent launch**: eight back-to-back launches of a one-CTA-per-SM kernel
   whose last 12 CTAs finish early (a wave tail), with and without the PDL attribute, and with and without
   ``griddepcontrol.launch_dependents`` at its start: CTA pairs on one TPC in the later launches.

H100 SXM (2026-11-24, docs/performance.md): CTA pairs and 2-CTA clusters both sit on one TPC (66 of 66);
clusters of 4 fit only 30 at a time (120 SMs); the coalescer merged 50% of the sectors when the two SMs of
a TPC read the same lines (and delivered 1.8x the bytes per second), none when two SMs of different TPCs
did, and 51.5% when four SMs on two TPCs did: a 2-CTA TMA multicast on this GPU replaces merging the
hardware already does for its TPC. With PDL and an early trigger the pairs scatter (1 to 5 of 66 on one TPC);
with PDL alone they stay (66 of 66).
"""
from __future__ import annotations

import argparse

SRC = r"""
__device__ __forceinline__ unsigned smid() { unsigned r; asm volatile("mov.u32 %0, %%smid;" : "=r"(r)); return r; }
__device__ __forceinline__ unsigned nsmid() { unsigned r; asm volatile("mov.u32 %0, %%nsmid;" : "=r"(r)); return r; }
extern "C" __global__ void where(int* out) {
  extern __shared__ char sm[];
  if (threadIdx.x == 0) { sm[0] = 1; out[blockIdx.x] = smid(); }
}
extern "C" __global__ void tail(int* out, int trigger) {
  extern __shared__ char sm[];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (trigger) asm volatile("griddepcontrol.launch_dependents;");
  if (threadIdx.x == 0) { sm[0] = 1; out[blockIdx.x] = smid(); }
  unsigned long long t0, t, dur = blockIdx.x + 12 >= gridDim.x ? 20000 : 30000 + (blockIdx.x % 7) * 300;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < dur);
}
#define BUF 16384
extern "C" __global__ void stream(const char* src, int mode, int region_bytes, int reps) {
  extern __shared__ __align__(1024) char sm[];
  __shared__ __align__(8) unsigned long long bar[4];
  unsigned s = smid(), half = nsmid() / 2;
  unsigned key = mode == 0 ? s : mode == 1 ? s / 2 : mode == 2 ? s % half : s / 4;
  const char* base = src + (size_t)key * region_bytes;
  int per = region_bytes / BUF, n = per * reps;
  if (threadIdx.x != 0) return;
  for (int b = 0; b < 4; b++)
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" :: "r"((unsigned)__cvta_generic_to_shared(&bar[b])));
  asm volatile("fence.mbarrier_init.release.cluster;");
  for (int i = 0; i < n + 4; i++) {
    unsigned a = (unsigned)__cvta_generic_to_shared(&bar[i % 4]);
    if (i >= 4) {     // the copy that last used this buffer has landed
      unsigned par = ((i / 4) - 1) & 1;
      asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared.b64 p, [%0], %1; @!p bra W; }"
                   :: "r"(a), "r"(par) : "memory");
    }
    if (i < n) {
      unsigned d = (unsigned)__cvta_generic_to_shared(sm + (i % 4) * BUF);
      asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" :: "r"(a), "r"(BUF) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   :: "r"(d), "l"(base + (size_t)(i % per) * BUF), "r"(BUF), "r"(a) : "memory");
    }
  }
}
"""
MODES = {0: "every SM its own region", 1: "the two SMs of a TPC share one", 2: "two SMs far apart share one",
         3: "four SMs (two TPCs) share one"}
REGION, REPS, HEAVY = 256 << 10, 64, 200_000


def max_active_clusters(kernel, size, smem):
    """``cuOccupancyMaxActiveClusters`` of ``kernel`` (384 threads, ``smem`` bytes) in clusters of ``size``
    (the launch config the runtime's cuda-bindings path builds, ``Kernel._config``)."""
    from cuda.bindings import driver as drv

    err, n = drv.cuOccupancyMaxActiveClusters(kernel.handle, kernel._config((size, 1, 1), (384, 1, 1), smem,
                                                                           (size, 1, 1)))
    return n if int(err) == 0 else f"error {err}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", type=int, choices=sorted(MODES), help="run only this streaming mode (for ncu)")
    a = ap.parse_args(argv)
    import torch

    from tirxpy.lower.nvrtc import compile_cuda
    from tirxpy.lower.runtime import ParamSpec, load_module

    major, minor = torch.cuda.get_device_capability()
    if major < 9:
        raise SystemExit(f"tpc_coalescing: needs an sm_90 GPU or newer (bulk copies, clusters), "
                         f"found sm_{major}{minor}")
    mod = load_module(compile_cuda(SRC, "sm_90a" if major == 9 else f"sm_{major}{minor}a"))
    where, stream = mod.function("where"), mod.function("stream")
    where.set_max_dynamic_smem(HEAVY)
    stream.set_max_dynamic_smem(4 * 16384)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if a.mode is None:
        out = torch.full((sms,), -1, dtype=torch.int32, device="cuda")
        lw = where.launcher([ParamSpec("out", dtype="int32")])
        for label, cluster in (("plain", None), ("clusters of 2", (2, 1, 1))):
            grid = sms - sms % 2 if cluster else sms
            lw(grid, 384, (out,), smem_bytes=HEAVY, cluster=cluster)
            ids = out[:grid].tolist()
            tpc = sum(ids[j] // 2 == ids[j + 1] // 2 for j in range(0, grid - 1, 2))
            print(f"{label:14s} CTA -> SM: {' '.join(map(str, ids))}")
            print(f"{'':14s} CTA pairs (2j, 2j+1) on one TPC: {tpc} of {grid // 2}")
        for size in (1, 2, 4, 8):
            n = max_active_clusters(where, size, HEAVY)
            used = f" ({n * size} of {sms} SMs)" if isinstance(n, int) else ""
            print(f"clusters of {size}: at most {n} active{used}")
        tail = mod.function("tail")
        tail.set_max_dynamic_smem(HEAVY)
        lt = tail.launcher([ParamSpec("out", dtype="int32"), ParamSpec("trigger", "scalar", "int32")])
        outs = torch.full((8, sms), -1, dtype=torch.int32, device="cuda")
        for pdl, trigger in ((False, 0), (True, 0), (True, 1)):
            for i in range(8):
                lt(sms, 384, (outs[i], trigger), smem_bytes=HEAVY, pdl=pdl)
            ids = outs[4:].tolist()
            tpc = [sum(r[j] // 2 == r[j + 1] // 2 for j in range(0, sms - 1, 2)) for r in ids]
            print(f"back-to-back launches, pdl={pdl}, early trigger={bool(trigger)}: CTA pairs on one TPC in "
                  f"launches 5-8: {' / '.join(map(str, tpc))} of {sms // 2}")
    src = torch.ones(sms * REGION, dtype=torch.uint8, device="cuda")
    ls = stream.launcher([ParamSpec("src", dtype="uint8"), ParamSpec("mode", "scalar", "int32"),
                          ParamSpec("region", "scalar", "int32"), ParamSpec("reps", "scalar", "int32")])
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for mode in ([a.mode] if a.mode is not None else sorted(MODES)):
        best = float("inf")
        for _ in range(5):
            e0.record()
            ls(sms, 32, (src, mode, REGION, REPS), smem_bytes=4 * 16384)
            e1.record()
            e1.synchronize()
            best = min(best, e0.elapsed_time(e1))
        rate = sms * REGION * REPS / best / 1e6
        print(f"mode {mode} ({MODES[mode]}): {best * 1e3:.0f} us, {rate:.0f} GB/s delivered")
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
