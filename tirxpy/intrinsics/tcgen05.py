"""tcgen05 (Blackwell sm_100a): tensor-memory alloc / dealloc, mma for cta_group 1 and 2 and
kinds f16 / tf32 / f8f6f4 / i8 / block-scaled, commit (incl. multicast), ld / st in every
shape x repeat, cp, shift, wait and thread-sync fences (PTX ISA 9.7.16).

    >>> e = tcgen05_ld.get(shape="16x256b", rep=2)
    >>> e.name, e.operand("d").count
    ('tcgen05_ld_16x256b_x2', 8)
"""
from tirxpy.errors import shown
from .defs import desc, imm, out, pred, reg, row, smem, tmem
from .entry import Intrinsic
from .errors import OperandError
from .table import Family

_BW = dict(lowest="sm_100a", highest="sm_110a", why_highest="tcgen05 is absent from consumer Blackwell sm_120")


def _ncols(k):
    n = k.get("ncols")
    if n is not None and (n < 32 or n > 512 or n & (n - 1)):
        return f"ncols = {n} must be a power of two in [32, 512]"
    return None


for _cg in (1, 2):
    _g = f"cta_group::{_cg}"
    row(f"tcgen05_alloc_cg{_cg}", f"tcgen05.alloc.{_g}.sync.aligned.shared::cta.b32 [{{dst}}], {{ncols}};",
        [smem("dst"), reg("ncols")], scope="warp", checks=[_ncols], **_BW,
        doc="Allocate ncols tensor-memory columns; the address is written to shared memory at dst.")
    row(f"tcgen05_dealloc_cg{_cg}", f"tcgen05.dealloc.{_g}.sync.aligned.b32 {{taddr}}, {{ncols}};",
        [tmem("taddr"), reg("ncols")], scope="warp", checks=[_ncols], **_BW)
    row(f"tcgen05_relinquish_alloc_permit_cg{_cg}", f"tcgen05.relinquish_alloc_permit.{_g}.sync.aligned;",
        scope="warp", **_BW)
    for _kind in ("f16", "tf32", "f8f6f4", "i8"):
        row(f"tcgen05_mma_cg{_cg}_{_kind}_ss",
            f"tcgen05.mma.{_g}.kind::{_kind} [{{d}}], {{a_desc}}, {{b_desc}}, {{idesc}}, {{enable_d}};",
            [tmem("d"), desc("a_desc"), desc("b_desc"), reg("idesc"), pred("enable_d")], **_BW,
            doc="D (+)= A @ B with A, B in shared memory (descriptors) and D in tensor memory.")
        row(f"tcgen05_mma_cg{_cg}_{_kind}_ts",
            f"tcgen05.mma.{_g}.kind::{_kind} [{{d}}], [{{a}}], {{b_desc}}, {{idesc}}, {{enable_d}};",
            [tmem("d"), tmem("a"), desc("b_desc"), reg("idesc"), pred("enable_d")], **_BW,
            doc="D (+)= A @ B with A in tensor memory.")
    for _kind, _vec in (("mxf8f6f4", "scale_vec::1X"), ("mxf4", "scale_vec::2X"), ("mxf4nvf4", "scale_vec::4X")):
        row(f"tcgen05_mma_cg{_cg}_{_kind}_block_scale",
            f"tcgen05.mma.{_g}.kind::{_kind}.block_scale.{_vec} [{{d}}], {{a_desc}}, {{b_desc}}, {{idesc}}, "
            f"[{{sfa}}], [{{sfb}}], {{enable_d}};",
            [tmem("d"), desc("a_desc"), desc("b_desc"), reg("idesc"), tmem("sfa"), tmem("sfb"), pred("enable_d")],
            **_BW, doc="Block-scaled MMA: scale factors for A and B in tensor memory at sfa, sfb.")
    row(f"tcgen05_commit_cg{_cg}",
        f"tcgen05.commit.{_g}.mbarrier::arrive::one.shared::cluster.b64 [{{bar}}];", [smem("bar")], **_BW,
        doc="Arrive on bar once every prior async tcgen05 operation of this thread has completed.")
    row(f"tcgen05_commit_cg{_cg}_multicast",
        f"tcgen05.commit.{_g}.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [{{bar}}], {{cta_mask}};",
        [smem("bar"), reg("cta_mask", "uint16")], **_BW)
    for _shape in ("128x256b", "4x256b", "128x128b", "64x128b.warpx2::02_13", "64x128b.warpx2::01_23",
                   "32x128b.warpx4"):
        _s = _shape.replace(".", "_").replace("::", "_")
        row(f"tcgen05_cp_cg{_cg}_{_s}", f"tcgen05.cp.{_g}.{_shape} [{{taddr}}], {{src_desc}};",
            [tmem("taddr"), desc("src_desc")], **_BW, doc="Copy shared memory (descriptor) to tensor memory.")
    row(f"tcgen05_shift_cg{_cg}", f"tcgen05.shift.{_g}.down [{{taddr}}];", [tmem("taddr")], **_BW)

row("tcgen05_wait_ld", "tcgen05.wait::ld.sync.aligned;", scope="warp", **_BW)
row("tcgen05_wait_st", "tcgen05.wait::st.sync.aligned;", scope="warp", **_BW)
row("tcgen05_fence_before_thread_sync", "tcgen05.fence::before_thread_sync;", **_BW)
row("tcgen05_fence_after_thread_sync", "tcgen05.fence::after_thread_sync;", **_BW)

# registers per thread for one repeat of each shape; largest repeat
_LDST = {"32x32b": (1, 128), "16x64b": (1, 128), "16x128b": (2, 64), "16x256b": (4, 32), "16x32bx2": (1, 128)}


def _ldst_build(store: bool):
    def build(shape: str = "32x32b", rep: int = 1, pack: bool = False) -> Intrinsic:
        if shape not in _LDST:
            raise OperandError(f"tcgen05.{'st' if store else 'ld'}: shape {shown(shape)} is not one of {sorted(_LDST)}")
        per, top = _LDST[shape]
        if not isinstance(rep, int) or rep < 1 or rep > top or rep & (rep - 1):
            raise OperandError(f"tcgen05 {shape}: repeat {shown(rep)} must be a power of two in [1, {top}]")
        nreg = per * rep
        op = "st" if store else "ld"
        mod = (".unpack::16b" if store else ".pack::16b") if pack else ""
        suffix = ("_unpack16" if store else "_pack16") if pack else ""
        half = shape == "16x32bx2"
        ops = [tmem("taddr")]
        ops.append(reg("v", "uint32", nreg) if store else out("d", "uint32", nreg))
        if half:
            ops.append(imm("half_offset"))
        regs = "{v}" if store else "{d}"
        tail = ", {half_offset}" if half else ""
        if store:
            text = f"tcgen05.st.sync.aligned.{shape}.x{rep}{mod}.b32 [{{taddr}}]{tail}, {regs};"
        else:
            text = f"tcgen05.ld.sync.aligned.{shape}.x{rep}{mod}.b32 {regs}, [{{taddr}}]{tail};"
        return Intrinsic(f"tcgen05_{op}_{shape}_x{rep}{suffix}", text, ops, scope="warp",
                         ptx=f"tcgen05.{op}.{shape}.x{rep}", **_BW)
    return build


def _ldst_parse(m):
    return dict(shape=m.group(2), rep=int(m.group(3)), pack=bool(m.group(4)))


def _ldst_examples():
    for shape, (per, top) in _LDST.items():
        for rep in (1, top):
            yield dict(shape=shape, rep=rep)
        yield dict(shape=shape, rep=2, pack=True)


tcgen05_ld = Family("tcgen05_ld_", _ldst_build(False), r"tcgen05_(ld)_(32x32b|16x64b|16x128b|16x256b|16x32bx2)_x(\d+)(_pack16)?",
                    _ldst_parse, _ldst_examples)
tcgen05_st = Family("tcgen05_st_", _ldst_build(True),
                    r"tcgen05_(st)_(32x32b|16x64b|16x128b|16x256b|16x32bx2)_x(\d+)(_unpack16)?",
                    _ldst_parse, _ldst_examples)
