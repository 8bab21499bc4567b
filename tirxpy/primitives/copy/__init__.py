"""tirxpy.primitives.copy: implementations of ``copy`` / ``copy_async`` (registered on import).

- :mod:`.reg_mem`: registers <-> global / shared, per-thread, vectorized from the layouts
- :mod:`.mem_mem`: global/shared <-> shared by all active threads (vectors), cp.async
- :mod:`.ldmatrix`: shared <-> registers with ldmatrix / stmatrix when the layout is their fragments
- :mod:`.tmem`: registers <-> tensor memory with tcgen05.ld / st .32x32b
- :mod:`.tmem_cp`: shared -> tensor memory with tcgen05.cp .32x128b.warpx4 (scale factors)
- :mod:`.tma`: TMA box loads (mbarrier expect_tx, multicast), stores and reduce-adds by one thread
- :mod:`.peer`: global <-> a peer GPU's global memory (a layout naming the rank axis), vectors
"""
from . import reg_mem  # noqa: F401
from . import mem_mem  # noqa: F401,E402
from . import tma  # noqa: F401,E402
from . import ldmatrix  # noqa: F401,E402
from . import tmem  # noqa: F401,E402
from . import tmem_cp  # noqa: F401,E402
from . import peer  # noqa: F401,E402
