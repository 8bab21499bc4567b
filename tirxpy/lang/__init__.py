"""tirxpy.lang: small, opt-in orchestration helpers for hand-written kernels.

Each names a piece that warp-specialized kernels otherwise re-derive by hand, and expands into the same
explicit IR (``print(kernel)`` shows it; there is no hidden pass):

- :class:`StageRing` (:mod:`.pipeline`): stage index and phase parity of a running position, waits
  and arrivals on a ring's ``full`` / ``empty`` mbarriers, cluster releases;
- tile schedulers (:mod:`.schedule`): the persistent walk, the grouped (L2-friendly) order, the
  balanced split of a tile grid;
- warp roles and register reallocation (:mod:`.roles`).
"""
from .errors import LangError
from .pipeline import StageRing
from .roles import WarpRoles, register_split, setup_barriers
from .schedule import cdiv, grouped_tile, persistent_units, split_tile, tiles_of_unit

__all__ = ["LangError", "StageRing", "WarpRoles", "cdiv", "grouped_tile", "persistent_units", "register_split",
           "setup_barriers", "split_tile", "tiles_of_unit"]
