"""tirxpy.sim: a CPU simulator of lowered kernels, values and synchronization.

``run(kernel, *tensors, arch=None, seed=0)`` runs every CTA of the grid (cluster by cluster)
with numpy, warps as coroutines that interleave at every intrinsic call and blocking wait
(``seed`` picks the interleaving), each warp's 32 lanes vectorized; the target comes from the
instructions the kernel uses unless ``arch=`` names one (:mod:`tirxpy.sim.target`), and the
arguments are checked first (:mod:`tirxpy.sim.args`). It returns the tensors like a launch
leaves them and raises :class:`SimReportError` listing every problem found: deadlocks, loops
that cannot exit or exceed the step budget (``no_progress``), shared-memory races (incl.
async-proxy reads without ``fence.proxy.async``), reads of registers / shared memory / tensor
memory nothing wrote (``uninitialized_read``), warp-scope instructions under divergent control
flow (``divergent_collective``), mbarrier misuse, accumulators read before
``wgmma.wait_group``, out-of-bounds accesses, TMEM over-allocation and intrinsics without a
model (named). A bad argument raises :class:`ArgumentError` before anything runs.
The result's ``bank_conflicts`` lists the source lines whose vector shared-memory accesses took more
wavefronts than ideal (:mod:`tirxpy.sim.banks`). ``tirxpy.testing.kernel_args(kernel)`` draws arguments that
match a kernel's parameters for property tests.

    >>> import numpy as np
    >>> from tirxpy import T
    >>> from tirxpy.sim import run
    >>> k = T.parse_script('''
    ... @T.prim_func
    ... def add1(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    ...     T.launch(grid=(2,), threads=32)
    ...     i = T.cta_id(0) * 32 + T.thread_id()
    ...     B[i] = A[i] + T.float32(1)
    ... ''')
    >>> a = np.arange(64, dtype=np.float32); b = np.zeros(64, np.float32)
    >>> _ = run(k, a, b); bool((b == a + 1).all())
    True
"""
from .args import ArgumentError
from .errors import ModelError, Problem, SimError, SimReportError, UnsupportedError
from .registry import Ctx, has_model, register_family, register_model
from .run import SimResult, run

__all__ = ["run", "SimResult", "ArgumentError", "register_model", "register_family", "has_model", "Ctx", "Problem", "SimError",
           "SimReportError", "UnsupportedError", "ModelError"]
