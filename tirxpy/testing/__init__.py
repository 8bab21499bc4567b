"""tirxpy.testing: hypothesis strategies for property tests of layouts and kernels.

Strategies (each returns a ``hypothesis`` ``SearchStrategy``):

- layouts (:mod:`tirxpy.testing.layouts`): :func:`tile_layouts` (shard iterators with and without
  replicas and offsets, within the hardware axes' bounds), :func:`memory_layouts` (on ``m`` only),
  :func:`compose_layouts` (a swizzle over a row-major tile), :func:`swizzled_layouts` (the hardware
  32B / 64B / 128B shared-memory swizzles), :func:`hardware_atoms` (WGMMA, mma.sync, ldmatrix,
  tcgen05 layouts, each with its logical shape), :func:`split_layouts` (an equivalent layout
  with iterators split);
- shapes and coordinates (:mod:`tirxpy.testing.shapes`): :func:`shapes` (a shape of a given size),
  :func:`aligned_shapes` (one ``group`` accepts), :func:`coords`, :func:`regions`;
- kernel arguments (:mod:`tirxpy.testing.kernel_args`): :func:`kernel_args` (arrays matching a
  kernel's parameters, for :func:`tirxpy.sim.run`).

Helpers: :func:`domain` (every coordinate of a shape), :func:`norm` and :func:`owner_set`
(owner lists compared with zero coordinates dropped), :data:`BOUNDS` / :data:`AXES`.

hypothesis is an optional dependency: ``import tirxpy`` never imports it, and importing this
package without it raises :class:`MissingDependencyError` (an ``ImportError``) that says
``pip install hypothesis``.

    >>> from hypothesis import given
    >>> from tirxpy.testing import tile_layouts
    >>> @given(tile_layouts())
    ... def test_size_is_the_product_of_the_shard_extents(L):
    ...     n = 1
    ...     for it in L.shard:
    ...         n *= it.extent
    ...     assert L.size() == n
    >>> test_size_is_the_product_of_the_shard_extents()
"""
from tirxpy.errors import TirxError


class MissingDependencyError(TirxError, ImportError):
    """An optional dependency of a tirxpy subpackage is not installed (the message names the install)."""


try:
    import hypothesis  # noqa: F401
except ImportError:  # only a missing hypothesis lands here: the name is the whole import
    raise MissingDependencyError(
        "tirxpy.testing needs hypothesis, which is not installed: pip install hypothesis "
        "(or pip install 'tirxpy[test]')", name="hypothesis") from None

from .kernel_args import kernel_args  # noqa: E402
from .layouts import (  # noqa: E402
    AXES, BOUNDS, EXTENTS, Atom, compose_layouts, hardware_atoms, iter_lists, memory_layouts, split_layouts,
    swizzled_layouts, tile_layouts,
)
from .shapes import aligned_shapes, coords, domain, norm, owner_set, regions, shapes  # noqa: E402

__all__ = [
    "MissingDependencyError", "AXES", "BOUNDS", "EXTENTS", "Atom", "aligned_shapes", "compose_layouts", "coords",
    "domain", "hardware_atoms", "iter_lists", "kernel_args", "memory_layouts", "norm", "owner_set", "regions",
    "shapes", "split_layouts", "swizzled_layouts", "tile_layouts",
]
