"""LangError: an orchestration helper (stage ring, scheduler, warp roles) was given arguments it cannot use."""
from tirxpy.errors import TirxError


class LangError(TirxError, ValueError):
    """A ``tirxpy.lang`` helper got a bad argument; the message names it and the fix."""
