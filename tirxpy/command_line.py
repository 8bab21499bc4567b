"""The command lines' one check of ``main(argv)``'s argument (a list of words, as ``sys.argv[1:]`` is)."""
from __future__ import annotations

import sys

from tirxpy.errors import shown


def checked_argv(argv, prog: str):
    """``sys.argv[1:]`` when ``argv`` is None, else ``argv`` as a new list when it is a list or tuple of str; else
    None, after printing ``prog: error: ...`` naming ``argv`` on stderr (the caller returns exit status 2). A word
    that is no str is judged by its type, never formatted by its own code.

        >>> checked_argv(("--table",), "tirxpy layout")
        ['--table']
    """
    if argv is None:
        return list(sys.argv[1:])
    if isinstance(argv, (list, tuple)):
        bad = next((i for i, w in enumerate(argv) if not isinstance(w, str)), None)
        if bad is None:
            return list(argv)
        what = f"argv[{bad}] is {shown(argv[bad], 60)} ({type(argv[bad]).__name__})"
    else:
        what = f"argv is {shown(argv, 60)} ({type(argv).__name__})"
    print(f"{prog}: error: argv must be a list of str (the command line's words); {what}", file=sys.stderr)
    return None
