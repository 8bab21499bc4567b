"""The primitives' verifier rules and documentation live in one table, :mod:`tirxpy.ir.op_spec`
(the verifier sits below this layer and reads it); this module re-exports its API."""
from tirxpy.ir.op_spec import OpSpec, lookup_op_spec, op_names, register_op_spec

__all__ = ["OpSpec", "lookup_op_spec", "op_names", "register_op_spec"]
