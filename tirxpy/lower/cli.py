"""``python -m tirxpy compile FILE_OR_MODULE --arch sm_90a|sm_100a [--emit cuda|ptx|sass]``.

Imports a Python file (or a dotted module), builds every kernel object it defines at module
level (``@tirxpy.jit`` factories only when they take no arguments) and prints a resources
table; ``--emit`` also prints each kernel's CUDA source, PTX or SASS. Errors exit 2 with a
message, never a traceback.

A target is a file when it names one (``kernels/gemm.py``; a file inside a package is imported as that package's
module), else a dotted module name (``tirxpy_kernels.gemm_sm90``), even where a directory of that name stands in
the working directory: ``compile tirxpy_kernels`` run from the repository root imports the package
``tirxpy_kernels``, as Python's ``import`` would from there. Any other directory is refused with what to pass
instead (a ``.py`` file in it, or its package's module name).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys

from tirxpy.jit import JitFunction
from tirxpy.scope.errors import TirxError
from tirxpy.errors import shown
from tirxpy.command_line import checked_argv

from .errors import LowerError

COLUMNS = ("kernel", "arch", "registers", "spills", "stack", "smem", "threads")


def _package_module(path: str):
    """``(dotted name, root directory)`` of a ``.py`` file inside a package (its directory and those above it
    with an ``__init__.py``; a package's ``__init__.py`` is the package itself), or ``(None, directory)`` for a
    file outside any package."""
    d, base = os.path.split(os.path.abspath(path))
    parts = [] if base == "__init__.py" else [os.path.splitext(base)[0]]
    inside = False
    while os.path.isfile(os.path.join(d, "__init__.py")):
        d, pkg = os.path.split(d)
        parts.insert(0, pkg)
        inside = True
    if not inside:
        return None, d
    if not all(p.isidentifier() for p in parts):
        raise ImportError(f"{path} is inside a package, but {'.'.join(parts)!r} is not a dotted module name "
                          "(rename the folders, or import it by module name)")
    return ".".join(parts), d


def _dotted(target: str) -> bool:
    """Whether ``target`` reads as a dotted module name (``pkg.mod``: identifiers joined by dots, no path).

        >>> _dotted("tirxpy_kernels.gemm_sm90"), _dotted("tirxpy_kernels/"), _dotted("k.py"), _dotted("my-dir")
        (True, False, False, False)
    """
    return not target.endswith(".py") and all(p.isidentifier() for p in target.split("."))


def _directory_error(target: str) -> IsADirectoryError:
    """What to pass instead of directory ``target``: a ``.py`` file in it (one is named), or the module name of
    the package it is (when it is one)."""
    try:
        files = sorted(f for f in os.listdir(target) if f.endswith(".py") and not f.startswith("_"))
    except OSError:
        files = []
    example = f", such as {os.path.join(target, files[0])}" if files else ""
    init = os.path.join(target, "__init__.py")
    try:
        name = _package_module(init)[0] if os.path.isfile(init) else None
    except ImportError:
        name = None
    module = f" or the package's module name, {name}" if name else " or a dotted module name"
    return IsADirectoryError(f"{target} is a directory; pass a file of Python source (a .py file{example}){module}")


def _load(target: str):
    """Import ``target``: a dotted module name, or a ``.py`` file. A file inside a package is imported as that
    package's module (its relative imports work), with the package's root on ``sys.path`` while it imports. A dotted
    name that is also a package directory here (``tirxpy_kernels`` in the repository root) is the module name: the
    package is imported with the working directory on ``sys.path``."""
    if not (target.endswith(".py") or os.path.sep in target or os.path.exists(target)):
        return importlib.import_module(target)
    if os.path.isdir(target):
        if not (_dotted(target) and os.path.isfile(os.path.join(target, "__init__.py"))):
            raise _directory_error(target)
        sys.path.insert(0, os.getcwd())
        try:
            return importlib.import_module(target)
        finally:
            sys.path.remove(os.getcwd())
    if not os.path.isfile(target):
        if os.path.exists(target):      # a device, FIFO or socket: no source to import
            raise FileNotFoundError(f"{target} is not a regular file; pass a file of Python source (a .py file) or "
                                    "a dotted module name")
        raise FileNotFoundError(f"no such file: {target}")
    name, root = _package_module(target)
    sys.path.insert(0, root)
    try:
        if name is not None:
            mod = importlib.import_module(name)
            where = getattr(mod, "__file__", None)
            if not where or not os.path.samefile(where, target):
                raise ImportError(f"{target} is module {shown(name)} of its package, but that name imports {where} "
                                  "(another copy of the package is imported first): compile it by module name")
            return mod
        name = "_tirxpy_compile_" + os.path.splitext(os.path.basename(target))[0].replace("-", "_")
        # the source loader takes a file of Python source by any name (the default only knows .py)
        spec = importlib.util.spec_from_file_location(name, target,
                                                      loader=importlib.machinery.SourceFileLoader(name, target))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(root)


def find_kernels(mod, errors=None) -> list:
    """``[(name, Kernel)]`` defined in ``mod``: kernel objects, and zero-argument jit factories' results. A
    factory that raises is reported in ``errors`` (``[(name, exception)]``) when given, else the error propagates."""
    from tirxpy.ir import Kernel

    out, seen = [], set()
    for name, obj in list(vars(mod).items()):
        if name.startswith("_"):
            continue
        if isinstance(obj, JitFunction):
            params = inspect.signature(obj.factory).parameters.values()
            if any(p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                   for p in params):
                continue
            if errors is None:
                obj = obj()
            else:
                try:
                    obj = obj()
                except Exception as e:  # noqa: BLE001 - the user's factory failed: reported, as an import is
                    errors.append((name, e))
                    continue
        if isinstance(obj, Kernel) and id(obj) not in seen:
            seen.add(id(obj))
            out.append((name, obj))
    return out


def _package_hint(mod) -> str:
    """For a package without kernels of its own: the advice to compile one of its modules (a few are named)."""
    import pkgutil

    path = getattr(mod, "__path__", None)
    if path is None:
        return ""
    try:
        subs = sorted(m.name for m in pkgutil.iter_modules(path) if not m.name.startswith("_"))
    except (OSError, TypeError):
        subs = []
    some = f" ({', '.join(f'{mod.__name__}.{n}' for n in subs[:3])}{', ...' if len(subs) > 3 else ''})" if subs else ""
    return f"; it is a package: compile one of its modules{some}, each by its own name or file"


def table(rows) -> str:
    widths = [max(len(str(r[i])) for r in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    lines = ["  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in [COLUMNS, *rows]]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = checked_argv(argv, "tirxpy compile")
    if argv is None:
        return 2
    ap = argparse.ArgumentParser(prog="python -m tirxpy compile",
                                 description="Build every kernel in a file or module and print its resources.")
    ap.add_argument("target", help="a .py file or a dotted module name (a package too: tirxpy_kernels)")
    ap.add_argument("--arch", default="sm_90a", help="compile target: sm_90a (Hopper) or sm_100a (Blackwell); default: sm_90a")
    ap.add_argument("--emit", choices=("cuda", "ptx", "sass"), help="also print each kernel's CUDA source, PTX or SASS; default: none (resources only)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    from .build import build

    try:
        from tirxpy.intrinsics.target import parse_arch

        parse_arch(args.arch)
        mod = _load(args.target)
    except TirxError as e:
        print(f"tirxpy compile: error: {e}", file=sys.stderr)
        return 2
    except (ImportError, OSError, SyntaxError) as e:
        print(f"tirxpy compile: error: cannot import {args.target!r}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - the user's module failed while importing
        print(f"tirxpy compile: error: importing {args.target!r} raised {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:     # the module calls sys.exit() when imported (a script, a __main__.py)
        print(f"tirxpy compile: error: importing {args.target!r} called sys.exit({e.code!r}); compile a module that "
              "defines kernels without running a program", file=sys.stderr)
        return 2
    failed: list = []
    kernels = find_kernels(mod, failed)
    for name, e in failed:
        print(f"tirxpy compile: error: the @tirxpy.jit factory {name!r} raised {type(e).__name__}: {e}", file=sys.stderr)
    if failed and not kernels:
        return 2
    if not kernels:
        takes = [f"{n}{inspect.signature(f.factory)}" for n, f in vars(mod).items()
                 if not n.startswith("_") and isinstance(f, JitFunction)]
        hint = (f"; its @tirxpy.jit factories take arguments ({', '.join(takes)}): bind one at module level, "
                "as `kernel = factory(...)`") if takes else _package_hint(mod)
        print(f"tirxpy compile: error: {args.target!r} defines no kernels (@T.prim_func objects or zero-argument "
              f"@tirxpy.jit factories at module level){hint}", file=sys.stderr)
        return 2
    rows, status = [], 0
    counts = {}
    for _, k in kernels:
        counts[k.name] = counts.get(k.name, 0) + 1
    for name, k in kernels:
        try:
            ck = build(k, args.arch)
            s = ck.summary()
            # variants of one kernel (same name) are told apart by the module attribute they are bound to
            label = f"{name}:{s['name']}" if counts[k.name] > 1 else s["name"]
            rows.append((label, s["arch"], s["registers"], s["spills"], s["stack"], s["smem"], s["threads"]))
            if args.emit:
                text = {"cuda": lambda: ck.cuda_source, "ptx": lambda: ck.ptx, "sass": lambda: ck.sass}[args.emit]()
                print(f"// ===== {label} ({args.emit}, {s['arch']}) =====")
                print(text)
        except (TirxError, LowerError) as e:
            print(f"tirxpy compile: error in kernel {name!r}:\n{e}", file=sys.stderr)
            status = 2
    if rows:
        print(table(rows))
    return 2 if failed else status


if __name__ == "__main__":
    sys.exit(main())
