"""tirxpy: a storage-first, hardware-native kernel IR for NVIDIA GPUs.

Layouts with explicit shard / replica / offset parts on named hardware axes attach to tiles;
tile primitives dispatch by operand layout, execution scope and target to native instructions;
lowering is local, to one CUDA C++ file with inline PTX.

    >>> import tirxpy
    >>> from tirxpy.layout import TileLayout, S, laneid
    >>> TileLayout(S[(32, 2) : (1@laneid, 1)]).apply(5, 1, shape=(32, 2))
    {'laneid': 5, 'm': 1}
"""
__version__ = "0.1.0"
from .errors import TirxError  # noqa: E402  (root of every tirxpy error)
from .ir import T  # noqa: E402  (authoring namespace; imports only layout / scope / ir)
from .scope import Tx  # noqa: E402
from .jit import jit  # noqa: E402
from . import intrinsics as _intrinsics  # noqa: E402,F401  (the PTX table: T.ptx.* resolves after `import tirxpy`)

from .primitives import op_specs as _primitive_op_specs  # noqa: E402,F401  (verifier rules of primitive ops; light)


def __getattr__(name):
    if name == "explain":  # lazy: lowering machinery loads on first use
        from .primitives.explain import explain

        return explain
    if name in ("compile", "build"):  # tirxpy.compile(kernel, arch=...) -> CompiledKernel, imported on first use
        from .lower.build import build

        return build
    raise AttributeError(f"module 'tirxpy' has no attribute {name!r}")
