"""wgmma (Hopper sm_90a only): fence, mma_async with A from shared memory (SS) or registers (RS)
for f16 / bf16 / tf32 / f8 at every N, commit_group, wait_group (PTX ISA 9.7.15).

Generated entries: ``wgmma.get(n=128, d="float32", a="bfloat16", b="bfloat16", a_from="smem")``
is the row ``wgmma_m64n128k16_f32_bf16_bf16_ss``. ``float32`` inputs mean tf32.

    >>> e = wgmma.get(n=16, d="float32", a="bfloat16", b="bfloat16", a_from="smem")
    >>> e.name, [o.name for o in e.args]
    ('wgmma_m64n16k16_f32_bf16_bf16_ss', ['d', 'a_desc', 'b_desc', 'scale_d', 'scale_a', 'scale_b', 'trans_a', 'trans_b'])
    >>> e.operand("d").count
    8
"""
from tirxpy.errors import shown
from .defs import desc, imm, inout, pred, reg, row
from .entry import Intrinsic
from .errors import OperandError
from .table import Family

_HOPPER = dict(lowest="sm_90a", highest="sm_90a", why_highest="Blackwell uses tcgen05.mma instead")

row("wgmma_fence", "wgmma.fence.sync.aligned;", scope="warpgroup", **_HOPPER,
    doc="Order register accesses before the next wgmma.mma_async that reads / writes them.")
row("wgmma_commit_group", "wgmma.commit_group.sync.aligned;", scope="warpgroup", **_HOPPER)
row("wgmma_wait_group", "wgmma.wait_group.sync.aligned {n};", [imm("n", range(0, 8))], scope="warpgroup",
    **_HOPPER, doc="Wait until at most n committed wgmma groups are pending.")

_IN_TOKEN = {"float16": "f16", "bfloat16": "bf16", "float32": "tf32", "float8_e4m3": "e4m3", "float8_e5m2": "e5m2"}
_D_TOKEN = {"float32": "f32", "float16": "f16"}
_K = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32}
_TOKEN_IN = {v: k for k, v in _IN_TOKEN.items()}
_TOKEN_D = {v: k for k, v in _D_TOKEN.items()}


def _build(n: int, d: str = "float32", a: str = "float16", b: str | None = None, a_from: str = "smem") -> Intrinsic:
    b = a if b is None else b
    if a not in _IN_TOKEN or b not in _IN_TOKEN:
        raise OperandError(f"wgmma: input dtypes must be among {sorted(_IN_TOKEN)} (float32 = tf32), got "
                           f"a={shown(a)}, b={shown(b)}")
    if d not in _D_TOKEN:
        raise OperandError(f"wgmma: accumulator dtype must be float32 or float16, got {shown(d)}")
    ta, tb, td = _IN_TOKEN[a], _IN_TOKEN[b], _D_TOKEN[d]
    fp8 = {"e4m3", "e5m2"}
    if not (ta == tb or (ta in fp8 and tb in fp8)):
        raise OperandError(f"wgmma: A and B must have the same dtype (or both be float8), got {a} and {b}")
    if td == "f16" and ta not in ("f16", "e4m3", "e5m2"):
        raise OperandError(f"wgmma: a float16 accumulator needs float16 or float8 inputs, got {a}")
    if not isinstance(n, int) or n % 8 or not 8 <= n <= 256:
        raise OperandError(f"wgmma: N = {shown(n)} must be a multiple of 8 in [8, 256]")
    if a_from not in ("smem", "reg"):
        raise OperandError(f"wgmma: a_from must be 'smem' or 'reg', got {shown(a_from)}")
    k = _K[ta]
    nacc = n // 2 if td == "f32" else n // 4
    dop = inout("d", "float32" if td == "f32" else "uint32", nacc)
    trans = ta in ("f16", "bf16")
    ops = [dop, desc("a_desc") if a_from == "smem" else reg("a", "uint32", 4), desc("b_desc"), pred("scale_d"),
           imm("scale_a", (1, -1)), imm("scale_b", (1, -1))]
    text = "{d}, " + ("{a_desc}" if a_from == "smem" else "{a}") + ", {b_desc}, {scale_d}, {scale_a}, {scale_b}"
    if trans:
        if a_from == "smem":
            ops.append(imm("trans_a", (0, 1)))
            text += ", {trans_a}"
        ops.append(imm("trans_b", (0, 1)))
        text += ", {trans_b}"
    shape = f"m64n{n}k{k}"
    name = f"wgmma_{shape}_{td}_{ta}_{tb}_{'ss' if a_from == 'smem' else 'rs'}"
    return Intrinsic(name, f"wgmma.mma_async.sync.aligned.{shape}.{td}.{ta}.{tb} {text};", ops, scope="warpgroup",
                     ptx=f"wgmma.mma_async.{shape}.{td}.{ta}.{tb}", **_HOPPER,
                     doc="D (+)= A @ B on a warpgroup; scale_d = 0 ignores the old D.")


def _parse(m):
    n, k, td, ta, tb, src = m.groups()
    if _K.get(ta) != int(k):
        raise OperandError(f"wgmma: K = {k} does not match input type {ta} (its K is {_K.get(ta)})")
    return dict(n=int(n), d=_TOKEN_D[td], a=_TOKEN_IN[ta], b=_TOKEN_IN[tb], a_from="smem" if src == "ss" else "reg")


def _examples():
    combos = [("float32", "float16", "float16"), ("float16", "float16", "float16"), ("float32", "bfloat16", "bfloat16"),
              ("float32", "float32", "float32"), ("float32", "float8_e4m3", "float8_e4m3"),
              ("float32", "float8_e4m3", "float8_e5m2"), ("float16", "float8_e5m2", "float8_e5m2")]
    for d, a, b in combos:
        for src in ("smem", "reg"):
            yield dict(n=64, d=d, a=a, b=b, a_from=src)
    for n in (8, 24, 200, 256):
        yield dict(n=n, d="float32", a="bfloat16", b="bfloat16", a_from="smem")


wgmma = Family("wgmma_m64", _build,
               r"wgmma_m64n(\d+)k(\d+)_(f32|f16)_(f16|bf16|tf32|e4m3|e5m2)_(f16|bf16|tf32|e4m3|e5m2)_(ss|rs)",
               _parse, _examples)
