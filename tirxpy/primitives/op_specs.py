"""Verifier rules (``tirxpy.ir.register_op_spec``) for the primitives this package adds beyond
the IR's pre-registered ones. Imported by ``import tirxpy`` (light: no implementations load), so
kernels that call them parse and verify before any lowering."""
from tirxpy.ir.op_spec import lookup_op_spec, register_op_spec

_ONCHIP = ("shared", "shared::cluster", "local", "tmem")
for _op in ("log", "log2", "silu", "sigmoid", "tanh"):
    if lookup_op_spec(_op) is None:
        register_op_spec(_op, n_operands=2, operand_storage={0: _ONCHIP}, doc="element-wise dst <- f(src)")
if lookup_op_spec("gemm_wait") is None:
    register_op_spec("gemm_wait", min_scope="warpgroup", max_scope="warpgroup", n_operands=(1, None),
                     doc="gemm_wait(n, C, ...): wait until at most n committed async gemm groups are pending, "
                         "then fence the accumulators C")
if lookup_op_spec("mask") is None:
    register_op_spec("mask", n_operands=3, operand_storage={0: ("local",)},
                     doc="dst <- src where col < cols and col <= row + diag, else value (2-D register tiles)")
