"""tirxpy/lower/locate.py: map an NVRTC / ptxas error line back to the intrinsic and IR statement."""
from tirxpy import T
from tirxpy.lower.codegen.kernel import generate
from tirxpy.lower.errors import CompileError
from tirxpy.lower.locate import locate, located


@T.prim_func
def two_calls(A: T.Tensor((32,), "int32")):
    T.launch(grid=(1,), threads=32)
    A[T.thread_id()] = 1
    T.ptx.syncthreads()


def _unit():
    return generate(two_calls, "sm_90a")


def _line_of(unit, needle, after=0):
    for n, ln in enumerate(unit.source.splitlines(), 1):
        if n > after and needle in ln:
            return n
    raise AssertionError(needle)


def test_error_inside_a_helper_names_the_intrinsic_and_its_first_call():
    u = _unit()
    helper = _line_of(u, "__device__ __forceinline__ void tx_syncthreads(")
    name, stmt = locate(u, f"k.cu({helper + 1}): error: something")
    call_line = _line_of(u, "tx_syncthreads();", after=helper + 2)
    assert name == "syncthreads" and stmt is u.origins[call_line]


def test_error_at_a_statement_line():
    u = _unit()
    store = _line_of(u, "A[")
    name, stmt = locate(u, f"k.cu({store}): error: bad")
    assert name is None and stmt is u.origins[store]


def test_ptxas_error_maps_an_opcode_to_the_intrinsic():
    u = _unit()
    ptx = "// header\n  barrier.sync.aligned 0;\n"
    name, stmt = locate(u, "ptxas application ptx input, line 2; error : x", ptx_of=lambda: ptx)
    assert name == "syncthreads" and stmt is not None
    assert locate(u, "ptxas application ptx input, line 1; error : x", ptx_of=lambda: ptx) == (None, None)
    assert locate(u, "some other failure") == (None, None)


def test_located_prefixes_the_message_or_returns_the_error():
    u = _unit()
    helper = _line_of(u, "__device__ __forceinline__ void tx_syncthreads(")
    err = CompileError("nvrtc failed", f"k.cu({helper + 1}): error: x", u.source)
    out = located(err, u)
    assert out is not err and out.intrinsic == "syncthreads"
    assert "error: intrinsic syncthreads does not compile for sm_90a" in str(out) and "nvrtc failed" in str(out)
    plain = CompileError("nvrtc failed", "no line here")
    assert located(plain, u) is plain
