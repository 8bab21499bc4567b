"""Every kernel in tirxpy_kernels/ (and examples/) prints and parses back to an equal kernel.

Modules are imported and every module-level :class:`~tirxpy.ir.Kernel` is round-tripped; a
module may also list kernel factories in ``ROUND_TRIP = [(factory, args, kwargs), ...]``.
"""
import importlib.util
import pathlib

import pytest

from tirxpy.ir import Kernel

from .helpers import round_trip

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILES = sorted(p for d in ("tirxpy_kernels", "examples") for p in (ROOT / d).rglob("*.py") if p.name != "__init__.py")


def kernels_in(path):
    spec = importlib.util.spec_from_file_location(f"_rt_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except ImportError as e:  # a kernel that needs an optional layer (torch, cuda) not present here
        pytest.skip(f"{path.name}: {e}")
    out = [v for v in vars(mod).values() if isinstance(v, Kernel)]
    for fn, args, kwargs in getattr(mod, "ROUND_TRIP", ()):
        out.append(fn(*args, **kwargs))
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_round_trip(path):
    for k in kernels_in(path):
        round_trip(k)
