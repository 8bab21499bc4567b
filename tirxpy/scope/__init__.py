"""tirxpy.scope: execution scopes (thread < warp < warpgroup < cta < cluster < kernel), the
``Tx`` primitive namespace and active thread sets (see DESIGN.md sections 1 and 3).

    >>> from tirxpy.scope import Tx, Scope, ThreadSet
    >>> Tx.wg.gemm.scope is Scope.WARPGROUP
    True
"""
from .errors import ScopeAttributeError, ScopeError, TirxError
from .scopes import Scope
from .threads import ThreadSet, full_cta_layout
from .tx import PrimitiveMarker, ScopeNamespace, Tx

__all__ = ["Scope", "ScopeAttributeError", "ScopeError", "TirxError", "ThreadSet", "Tx", "PrimitiveMarker",
           "ScopeNamespace", "full_cta_layout"]
