"""tirxpy.primitives.elementwise: fill, cast and element-wise maps (registered on import).

- :mod:`.local`: on register tiles, per thread and slot, with broadcasting
- :mod:`.memory`: fill of shared / global tiles by the active threads
"""
from . import local, memory  # noqa: F401
