"""Short constructors the family files use to write table rows compactly."""
from __future__ import annotations

from .entry import Intrinsic, Operand
from .table import add


def reg(name, dtype="uint32", count=None):
    """A read register operand (a vector ``{...}`` when count is given, even count=1)."""
    return Operand(name, "reg", dtype, "r", count or 1, vector=count is not None)


def out(name, dtype="uint32", count=None):
    """A written register operand."""
    return Operand(name, "reg", dtype, "w", count or 1, vector=count is not None)


def inout(name, dtype="float32", count=None):
    return Operand(name, "reg", dtype, "rw", count or 1, vector=count is not None)


def imm(name, values=()):
    return Operand(name, "imm", "int32", "r", 1, tuple(values))


def pred(name, access="r"):
    return Operand(name, "pred", "bool", access)


def smem(name):
    return Operand(name, "smem_addr")


def cluster(name):
    return Operand(name, "cluster_addr")


def tmem(name):
    return Operand(name, "tmem_addr")


def gmem(name, access="r"):
    return Operand(name, "gmem_ptr", None, access)


def tmap(name="tmap", access="r"):
    """A CUtensorMap operand; ``access`` is what the instruction does to the global tensor the map covers ("w" for
    a TMA store or reduction)."""
    return Operand(name, "tensormap", None, access)


def desc(name):
    return Operand(name, "desc64")


def row(name, template, operands=(), **kw) -> Intrinsic:
    """Create an entry and put it in the table."""
    return add(Intrinsic(name, template, operands, **kw))
