"""tirxpy/lower/codegen/stmt.py: statements rendered as C++ (lets, stores, loops, branches, allocations)."""
from tirxpy import T
from tirxpy.ir import IntImm, IntrinsicCall, Var
from tirxpy.ir.stmt import Evaluate, For, IfThenElse, SeqStmt
from tirxpy.lower.codegen.kernel import generate
from tirxpy.lower.codegen.stmt import issues_wgmma


@T.prim_func
def control(A: T.Tensor((32,), "int32"), n: T.int32):
    T.launch(grid=(1,), threads=32)
    t = T.thread_id()
    r = T.alloc_local((4,), "int32")
    for j in T.unroll(4):
        r[j] = t + j
    for j in T.serial(n):
        if j == 1:
            r[0] = r[0] + 1
        else:
            r[1] = r[1] - 1
    while r[0] < 10:
        r[0] = r[0] * 2
    A[t] = r[0] + r[1]


def test_statements_render_in_order():
    src = generate(control, "sm_90a").source
    assert "const int32_t t = " in src
    assert "alignas(16) int32_t r[4];" in src
    i_unroll = src.index("#pragma unroll\n")
    i_for = src.index("for (int32_t j = 0; j < 4; ++j) {")
    assert i_unroll < i_for
    assert "for (int32_t j_1 = 0; j_1 < n; ++j_1) {" in src
    assert "if (j_1 == 1) {" in src and "} else {" in src
    assert "while (r[0] < 10) {" in src
    assert src.index("while") > src.index("} else {")


def test_issues_wgmma_finds_commit_group_at_any_depth():
    commit = Evaluate(IntrinsicCall("wgmma_commit_group", [], None))
    fence = Evaluate(IntrinsicCall("fence_proxy_async", [], None))
    i = Var("i")
    inner = For(i, IntImm(0), IntImm(2), "serial", [IfThenElse(Var("c", "bool"), [commit])])
    assert issues_wgmma(SeqStmt([fence, inner]))
    assert not issues_wgmma(SeqStmt([fence]))


@T.prim_func
def loop_kinds(A: T.Tensor((64,), "int32"), n: T.int32):
    T.launch(grid=(1,), threads=32)
    t = T.thread_id()
    for a in T.rolled(4):
        A[t] = A[t] + a
    for b in T.serial(4):
        A[t] = A[t] + b
    for c in T.rolled(1, n):
        A[t + 32] = A[t + 32] + c


def _pragma_of(src, head):
    """The line right above the loop head ``head`` (its pragma, if any)."""
    lines = [ln.strip() for ln in src.splitlines()]
    return lines[next(i for i, ln in enumerate(lines) if ln.startswith(head)) - 1]


def test_rolled_loop_is_kept_a_loop_and_serial_is_left_to_nvcc():
    src = generate(loop_kinds, "sm_90a").source
    assert _pragma_of(src, "for (int32_t a = 0; a < 4; ++a) {") == "#pragma unroll 1"
    assert _pragma_of(src, "for (int32_t c = 1; c < n; ++c) {") == "#pragma unroll 1"
    assert _pragma_of(src, "for (int32_t b = 0; b < 4; ++b) {") != "#pragma unroll 1"
    assert src.count("#pragma unroll 1") == 2 and "#pragma unroll\n" not in src
