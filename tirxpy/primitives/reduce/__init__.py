"""tirxpy.primitives.reduce: sum / max / min over an axis (registered on import).

- :mod:`.warp`: register tiles, in-thread fold then warp butterflies over the axis's lane bits
"""
from . import warp  # noqa: F401
