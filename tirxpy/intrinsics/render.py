"""The C++ text codegen puts before the kernels: a prelude and one helper per used entry.

    >>> from tirxpy.intrinsics import get
    >>> text = render_helpers([get("fence_proxy_async"), get("fence_proxy_async")], arch="sm_90a")
    >>> text.count("tx_fence_proxy_async(")
    1
"""
from __future__ import annotations

from typing import Iterable

from .entry import Intrinsic
from .table import get

#: Declarations every generated unit needs. NVRTC cannot include <cuda.h>, so the 128-byte
#: CUtensorMap is declared here (same size and alignment as the driver's).
PRELUDE = """\
#ifndef TIRXPY_PRELUDE
#define TIRXPY_PRELUDE
#ifndef CUDA_VERSION
struct alignas(64) CUtensorMap { unsigned long long opaque[16]; };
#endif
__device__ __forceinline__ unsigned tx_smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
#endif  // TIRXPY_PRELUDE
"""


def render_helpers(used: Iterable[Intrinsic | str], arch: str | None = None, *, prelude: bool = True) -> str:
    """Prelude + each distinct entry's helper, in first-use order. With ``arch``, every entry is
    checked against the target first (TargetError names the first one the target lacks)."""
    seen: dict[str, Intrinsic] = {}
    for e in used:
        e = get(e) if isinstance(e, str) else e
        if e.name not in seen:
            if arch is not None:
                e.check_target(arch)
            seen[e.name] = e
    parts = [PRELUDE] if prelude else []
    parts += [e.render_helper() for e in seen.values()]
    return "\n\n".join(parts) + "\n"
