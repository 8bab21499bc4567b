import pytest

from tirxpy.ir import IRError, Scope, lookup_op_spec, register_op_spec


def test_preregistered_ops():
    for op in ("copy", "copy_async", "gemm", "gemm_async", "fill", "cast", "map", "binary", "unary", "reduce"):
        assert lookup_op_spec(op) is not None, op
    assert lookup_op_spec("gemm_async").operand_storage[2] == ("shared",)


def test_register_rules():
    spec = register_op_spec("spec_test", min_scope="wg", n_operands=1, operand_storage={0: "smem"})
    assert spec.min_scope is Scope.WARPGROUP and spec.n_operands == (1, 1) and spec.operand_storage == {0: ("shared",)}
    with pytest.raises(IRError, match="min_scope cta is wider than max_scope warp"):
        register_op_spec("spec_bad", min_scope="cta", max_scope="warp")
    with pytest.raises(IRError, match="unknown storage scope 'l2'"):
        register_op_spec("spec_bad2", operand_storage={0: "l2"})


def test_keyword_arguments_are_part_of_the_table():
    spec = lookup_op_spec("copy_async")
    assert {"mbar", "multicast", "cta_group", "arrive", "expect_tx", "taddr"} <= set(spec.kwargs)
    assert spec.unknown_kwargs({"mbar": 1, "dispatch": "tma_load", "mbarrier": 2}) == ["mbarrier"]
    assert "ex2.approx.ftz.f32" in lookup_op_spec("exp").doc
    user = register_op_spec("spec_any_kwargs")
    assert user.kwargs is None and user.unknown_kwargs({"anything": 1}) == []
    assert register_op_spec("spec_kw", kwargs={"k": "what k does"}).unknown_kwargs({"k": 1, "j": 2}) == ["j"]


@pytest.mark.parametrize("kwargs,msg", [(["k"], "maps each keyword argument"), ({"1k": "x"}, "not an identifier"),
                                        ({"dispatch": "x"}, "always accepted"), ({"k": 3}, "meaning of k= is a str")])
def test_bad_keyword_argument_tables_are_refused(kwargs, msg):
    with pytest.raises(IRError, match=msg):
        register_op_spec("spec_bad_kw", kwargs=kwargs)


def test_verify_refuses_an_unknown_keyword_argument_and_lists_the_valid_ones():
    from tirxpy import T
    from tirxpy.ir import VerifyError

    text = """
@T.prim_func
def k(A: T.Tensor((64, 64), "float16")):
    T.launch(grid=(1,), threads=128)
    S = T.alloc_shared((64, 64), "float16")
    bar = T.alloc_shared((1,), "uint64")
    Tx.cta.copy_async(S, A, mbarrier=bar[0])
"""
    with pytest.raises(VerifyError, match=r"unknown keyword argument\(s\) mbarrier=; copy_async takes mbar=, "
                                          r"multicast=.*\(and dispatch=\)") as e:
        T.parse_script(text)
    assert "help(Tx.copy_async)" in str(e.value)
    assert T.parse_script(text.replace("mbarrier=", "mbar="))        # the valid keyword verifies


def test_accept_kwargs_widens_or_opens_an_entry():
    from tirxpy.ir.op_spec import accept_kwargs

    register_op_spec("spec_widen", kwargs={"a": "first"})
    assert set(accept_kwargs("spec_widen", {"b": "second"}).kwargs) == {"a", "b"}
    assert accept_kwargs("spec_widen").kwargs is None
    with pytest.raises(IRError, match="has no op-spec entry"):
        accept_kwargs("spec_never_registered", {"a": "x"})
