"""tirxpy.primitives.elementwise: fill, cast and element-wise maps (registered on import).

- :mod:`.local`: on register tiles, per thread and slot, with broadcasting
- :mod:`.memory`: fill of shared / global tiles by the active threads
- :mod:`.mask`: column-bound / causal masks of 2-D register tiles (attention scores)
"""
from . import local, mask, memory  # noqa: F401
