"""GEMM level 4: the library kernel, :func:`tirxpy_kernels.gemm` (built by :func:`tirxpy_kernels.gemm_sm90.gemm_sm90`).

``C = A @ B^T`` (``A`` ``(M, K)``, ``B`` ``(N, K)``, bf16 in, float32 out here). Level 3's producer and two
consumers stay; what the library kernel adds, each explained in docs/tutorial/07-gemm.md:

- **persistence**: one CTA per SM walks many tiles (:func:`tirxpy.lang.persistent_units`,
  :func:`tirxpy.lang.tiles_of_unit`), in a grouped order that keeps a band of ``A`` and ``B`` in L2
  (:func:`tirxpy.lang.grouped_tile`); the ring's running position spans every k-block of every tile, so the
  producer loads the next tile while the consumers finish this one;
- **clusters** (``CM=2``): two CTAs share each stage of ``B`` through a TMA multicast, and a consumer
  releases the stage in both (``StageRing(..., cluster=2)``);
- a **shared-memory epilogue**: the accumulator leaves through ``stmatrix`` and a TMA store, overlapped with
  the next tile's loads; bias and activation fused into it;
- a **plan**: tile width, stages, schedule and split chosen per problem by a cost model
  (``tirxpy_kernels.gemm_sm90.check_config`` shows the choice).

On the GPU this level calls ``tirxpy_kernels.gemm(a, w.t(), c)`` (its plan for the shape); under the simulator it
builds a small configuration that still exercises each part: 128-column tiles, 2 stages, 2-CTA clusters,
4 persistent CTAs (so each walks several tiles), ragged edges in M, N and K.

    python examples/gemm/level_4.py          # on a Hopper GPU, next to cuBLAS
    python examples/gemm/level_4.py --sim    # under the CPU simulator, against float64
"""
import sys

import ladder

NAME = "level 4 (tirxpy_kernels.gemm: persistent, clusters)"
GPU_SHAPE = (4096, 4096, 4096)
SIM_SHAPE = (200, 136, 104)
SHAPE_RULE = "M >= 128, N >= 128, K >= 8; N and K multiples of 8 (16-byte rows for TMA)"
SIM_CONFIG = dict(BN=128, STAGES=2, CM=2, sms=4, out_dtype="float32")


def check_shape(M, N, K):
    """None, or why the library kernel does not take ``(M, N, K)`` (its own configuration check)."""
    from tirxpy_kernels.errors import KernelConfigError
    from tirxpy_kernels.gemm_sm90 import check_config

    try:
        check_config(M, N, K, **SIM_CONFIG)
    except KernelConfigError as e:
        return str(e)
    return None


def gpu_run(a, w, c):
    import tirxpy_kernels

    tirxpy_kernels.gemm(a, w.t(), c)


def sim_run(a, w, c, seed):
    import torch

    from tirxpy_kernels.gemm_sm90 import gemm_sm90
    from tirxpy import sim

    M, K = a.shape
    N = w.shape[0]
    sim.run(gemm_sm90(M, N, K, **SIM_CONFIG), a, w, torch.zeros(1, 1), c, seed=seed)


if __name__ == "__main__":
    sys.exit(ladder.main(sys.modules[__name__]))
