"""tirxpy.primitives.copy: implementations of ``copy`` / ``copy_async`` (registered on import).

- :mod:`.reg_mem`: registers <-> global / shared, per-thread, vectorized from the layouts
"""
from . import reg_mem  # noqa: F401
