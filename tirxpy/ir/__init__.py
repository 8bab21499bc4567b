"""tirxpy.ir: kernel IR (expressions, statements, tensors with storage scope and layout,
kernels), the ``T`` authoring namespace with its parser (``@T.prim_func``), the printer,
structural equality, the active-thread analysis and the verifier (DESIGN.md section 1).

    >>> from tirxpy.ir import T, Tx
    >>> @T.prim_func
    ... def add_one(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
    ...     T.launch(grid=(8,), threads=128)
    ...     i = T.cta_id(0) * 128 + T.thread_id()
    ...     B[i] = A[i] + T.float32(1)
    >>> print(add_one)
    @T.prim_func
    def add_one(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
        T.launch(grid=(8,), threads=128)
        i = T.cta_id(0) * 128 + T.thread_id()
        B[i] = A[i] + T.float32(1.0)
    >>> from tirxpy.ir import structural_equal
    >>> structural_equal(T.parse_script(str(add_one)), add_one)
    True
"""
from tirxpy.scope import Scope, ThreadSet, Tx

from .analysis import ActiveThreads, active_threads, annotate_active_threads
from .buffer import STORAGE_SCOPES, Buffer, BufferRegion
from .dtype import CANONICAL as DTYPES, DataType, PointerType, ptr
from .errors import IRError, ParseError, Span, TirxError, VerifyError
from .expr import (
    Add, AddressOf, And, BinaryOp, BitAnd, BitNot, BitOr, BitXor, BoolImm, BufferLoad, Call, Cast, CmpOp, Div,
    ElectOne, EQ, Expr, FloatImm, FloorDiv, FloorMod, GE, GT, IntImm, IntrinsicCall, LE, LT, Max, Min, Mul, NE,
    Not, Or, ScopeId, Select, Shl, Shr, Sub, Var,
)
from .intrin_sig import IntrinsicSignature, lookup_intrinsic_signature, register_intrinsic_signature
from .kernel import Kernel, LaunchConfig
from .op_spec import OpSpec, lookup_op_spec, register_op_spec
from .printer import node_text
from .script import T
from .simplify import simplify
from .stmt import (
    Allocate, BufferStore, Evaluate, For, IfThenElse, LetStmt, PrimitiveCall, SeqStmt, Stmt, While,
)
from .structural import structural_equal
from .verify import shared_bytes, verify

PrimFunc = Kernel
