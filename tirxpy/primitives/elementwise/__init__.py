"""tirxpy.primitives.elementwise: fill, cast and element-wise maps (registered on import).

- :mod:`.local`: on register tiles, per thread and slot, with broadcasting
"""
from . import local  # noqa: F401
