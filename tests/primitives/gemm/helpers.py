"""Small kernels around one gemm call, and walkers over the lowered IR."""
from tirxpy import T
from tirxpy.primitives import lower_calls

from tests.primitives.helpers import calls  # noqa: F401  (re-exported for the gemm tests)


def kernel(body: str, env: dict, threads: int = 128, cluster=None, params: str = 'G: T.Tensor((8,), "float32")',
           verify: bool = True):
    """A kernel whose body is ``body`` (4-space indented lines; the allocations it needs
    included); names in ``env`` (layouts) are visible to it. ``verify=False`` skips the IR
    verifier (to reach the dispatcher's own reasons for calls the verifier also rejects)."""
    cl = f", cluster={cluster}" if cluster else ""
    grid = tuple(cluster) if cluster else (1,)      # a cluster divides the grid
    src = f"@T.prim_func\ndef k({params}):\n    T.launch(grid={grid}{cl}, threads={threads})\n{body}"
    return T.parse_script(src, env=dict(env), verify=verify)


def names(stmt) -> list:
    return [c.name for c in calls(stmt)]


def lowered(k, arch):
    return lower_calls(k, arch).body


def slot_range(region):
    """(start, count) of a 1-d region of a register-slot alias."""
    return region.starts[0].value, region.extents[0]
