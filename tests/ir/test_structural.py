from tirxpy.ir import Buffer, LetStmt, SeqStmt, Var, structural_equal


def test_alpha_equivalence_and_consistency():
    i, j, k = Var("i"), Var("j"), Var("k")
    assert structural_equal(i * 2 + j, j * 2 + i)  # consistent renaming i<->j
    assert not structural_equal(i * 2 + i, j * 2 + k)
    assert not structural_equal(i, Var("i", "int64"))
    assert structural_equal(i, i, map_free_vars=False) and not structural_equal(i, j, map_free_vars=False)


def test_buffers_and_statements():
    A, B = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    assert structural_equal(A[1], B[1])
    assert not structural_equal(A[1], Buffer("C", (4,), "float16")[1])
    x, y = Var("x"), Var("y")
    assert structural_equal(SeqStmt([LetStmt(x, x.__class__("z") * 0 + 1)]), SeqStmt([LetStmt(y, y.__class__("w") * 0 + 1)]))


def test_an_alias_equals_only_an_alias_of_the_corresponding_root():
    a = Buffer("a", (8,), "float32", "local")
    b = Buffer("b", (8,), "float32", "local")
    va, vb = a.alias((4,), name="va"), b.alias((4,), name="vb")
    plain = Buffer("p", (4,), "float32", "local")
    assert structural_equal(va, vb)
    assert not structural_equal(va, plain) and not structural_equal(plain, va)
    assert not structural_equal([b, va], [b, vb])     # b pairs with b, so va (over a) cannot pair with vb (over b)
    assert structural_equal([a, va], [b, vb])
