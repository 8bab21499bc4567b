"""elect.sync, setmaxnreg, warp shuffles, atomics / reductions, clocks, nanosleep, special registers."""
from .defs import gmem, imm, out, pred, reg, row, smem


def _nreg(k):
    n = k.get("nregs")
    if n is not None and (not 24 <= n <= 256 or n % 8):
        return f"nregs = {n} must be a multiple of 8 in [24, 256]"
    return None


row("elect_sync", "elect.sync _|{elected}, {mask};", [pred("elected", "w"), reg("mask")], ret="elected",
    lowest="sm_90", scope="warp", memory=False, doc="True in exactly one active lane of mask.")
_NREGS = tuple(range(24, 257, 8))
row("setmaxnreg_inc", "setmaxnreg.inc.sync.aligned.u32 {nregs};", [imm("nregs", _NREGS)], lowest="sm_90a",
    scope="warpgroup", checks=[_nreg], doc="Raise this warpgroup's per-thread register budget to nregs.")
row("setmaxnreg_dec", "setmaxnreg.dec.sync.aligned.u32 {nregs};", [imm("nregs", _NREGS)], lowest="sm_90a",
    scope="warpgroup", checks=[_nreg])

for _mode, _c in (("idx", "0x1f"), ("up", "0"), ("down", "0x1f"), ("bfly", "0x1f")):
    for _dt, _t in (("uint32", "b32"), ("float32", "f32")):
        row(f"shfl_sync_{_mode}_{_t}", f"shfl.sync.{_mode}.b32 {{r}}, {{v}}, {{lane}}, {_c}, {{mask}};",
            [out("r", _dt), reg("v", _dt), reg("lane"), reg("mask")], ret="r", scope="warp", memory=False)

for _op, _t, _dt in (("add", "u32", "uint32"), ("add", "s32", "int32"), ("add", "f32", "float32"),
                     ("add", "u64", "uint64"), ("max", "s32", "int32"), ("min", "s32", "int32"),
                     ("max", "u32", "uint32"), ("exch", "b32", "uint32"), ("or", "b32", "uint32"),
                     ("and", "b32", "uint32")):
    row(f"atom_global_{_op}_{_t}", f"atom.global.{_op}.{_t} {{old}}, [{{ptr}}], {{v}};",
        [out("old", _dt), gmem("ptr", "rw"), reg("v", _dt)], ret="old")
    if _op != "exch":
        row(f"red_global_{_op}_{_t}", f"red.global.{_op}.{_t} [{{ptr}}], {{v}};", [gmem("ptr", "rw"), reg("v", _dt)])
row("atom_global_cas_b32", "atom.global.cas.b32 {old}, [{ptr}], {cmp}, {v};",
    [out("old"), gmem("ptr", "rw"), reg("cmp"), reg("v")], ret="old")
row("atom_shared_add_u32", "atom.shared::cta.add.u32 {old}, [{addr}], {v};", [out("old"), smem("addr"), reg("v")],
    ret="old")
row("atom_shared_add_f32", "atom.shared::cta.add.f32 {old}, [{addr}], {v};",
    [out("old", "float32"), smem("addr"), reg("v", "float32")], ret="old")
row("red_global_add_release_gpu_u32", "red.release.gpu.global.add.u32 [{ptr}], {v};", [gmem("ptr", "rw"), reg("v")])
row("ld_acquire_gpu_u32", "ld.acquire.gpu.global.u32 {r}, [{ptr}];", [out("r"), gmem("ptr")], ret="r")
row("ld_global_f32", "ld.global.f32 {r}, [{ptr}];", [out("r", "float32"), gmem("ptr")], ret="r",
    doc="A plain (weak, coherent) load: unlike the read-only path (ld.global.nc) a compiler keeps it ahead of "
        "the next release (an mbarrier arrive), so a value loaded early lands early.")

row("clock", "mov.u32 {r}, %clock;", [out("r")], ret="r", ptx="%clock")
row("clock64", "mov.u64 {r}, %clock64;", [out("r", "uint64")], ret="r", ptx="%clock64")
row("globaltimer", "mov.u64 {r}, %globaltimer;", [out("r", "uint64")], ret="r", ptx="%globaltimer")
row("nanosleep", "nanosleep.u32 {ns};", [reg("ns")])
for _sreg in ("laneid", "warpid", "smid", "nsmid"):
    row(_sreg, f"mov.u32 {{r}}, %{_sreg};", [out("r")], ret="r", memory=False, ptx=f"%{_sreg}")
row("trap", "trap;")
