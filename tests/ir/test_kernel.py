"""tirxpy/ir/kernel.py: LaunchConfig and Kernel constructors."""
import pytest

from tirxpy.ir import Buffer, IntImm, IRError, Kernel, LaunchConfig, SeqStmt, Var
from tirxpy.ir.expr import Expr


def test_launch_config_normalizes_grid_and_cluster():
    lc = LaunchConfig(grid=4, threads=IntImm(64), cluster=2, smem=1024)
    assert len(lc.grid) == 1 and isinstance(lc.grid[0], Expr) and lc.grid[0].value == 4
    assert lc.threads == 64 and lc.cluster == (2,) and lc.smem == 1024 and lc.pdl is False
    assert LaunchConfig(cluster=(2, 2, 1)).cluster_size == 4
    assert LaunchConfig().cluster_size == 1


@pytest.mark.parametrize("kw,msg", [({"grid": (1, 1, 1, 1)}, "grid has 1 to 3"), ({"grid": ()}, "grid has 1 to 3"),
                                    ({"threads": 1.5}, "threads= must be a compile-time int"),
                                    ({"threads": True}, "threads="), ({"cluster": (1, 1, 1, 1)}, "cluster has"),
                                    ({"smem": "x"}, "smem="), ({"pdl": 1}, "pdl= must be True or False")])
def test_launch_config_refuses(kw, msg):
    with pytest.raises(IRError, match=msg):
        LaunchConfig(**kw)


def test_grid_may_be_an_expression_of_a_parameter():
    n = Var("n")
    assert LaunchConfig(grid=(n, 2)).grid[0] is n


def test_kernel_fields_and_text():
    A, n = Buffer("A", (4,), "float32"), Var("n")
    k = Kernel("k", [A, n], LaunchConfig(threads=32), [])
    assert isinstance(k.body, SeqStmt) and len(k.body) == 0
    assert k.threads == 32 and k.params == (A, n)
    assert repr(k) == "<Kernel k(A, n)>"
    assert str(k) == k.script() and "def k(" in str(k) and "threads=32" in str(k)


def test_kernel_refuses_bad_params_and_launch():
    with pytest.raises(IRError, match="kernel parameters"):
        Kernel("k", [IntImm(1)], LaunchConfig(), [])
    with pytest.raises(IRError, match="launch configuration"):
        Kernel("k", [], None, [])
