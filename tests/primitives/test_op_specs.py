"""tirxpy/primitives/op_specs.py: re-exports the op-spec table of tirxpy.ir.op_spec."""
import tirxpy.ir.op_spec as ir_spec
from tirxpy.primitives import op_specs


def test_reexports_are_the_ir_objects():
    for name in op_specs.__all__:
        assert getattr(op_specs, name) is getattr(ir_spec, name)


def test_lookup_of_known_and_unknown_primitives():
    names = op_specs.op_names()
    assert "copy" in names and "gemm" in names and names == sorted(names)
    spec = op_specs.lookup_op_spec("copy")
    assert isinstance(spec, op_specs.OpSpec)
    assert op_specs.lookup_op_spec("no_such_primitive") is None
