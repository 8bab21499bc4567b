"""cp.async (Ampere asynchronous global -> shared copies) and its groups (PTX ISA 9.7.9.25)."""
from .defs import gmem, imm, reg, row, smem

for _size in (4, 8, 16):
    row(f"cp_async_ca_{_size}", f"cp.async.ca.shared.global [{{dst}}], [{{src}}], {_size};",
        [smem("dst"), gmem("src")])
    row(f"cp_async_ca_{_size}_zfill", f"cp.async.ca.shared.global [{{dst}}], [{{src}}], {_size}, {{src_bytes}};",
        [smem("dst"), gmem("src"), reg("src_bytes")],
        doc="Copy src_bytes (<= size) bytes and zero-fill the rest of the destination.")
row("cp_async_cg_16", "cp.async.cg.shared.global [{dst}], [{src}], 16;", [smem("dst"), gmem("src")])
row("cp_async_cg_16_zfill", "cp.async.cg.shared.global [{dst}], [{src}], 16, {src_bytes};",
    [smem("dst"), gmem("src"), reg("src_bytes")])
row("cp_async_commit_group", "cp.async.commit_group;")
row("cp_async_wait_group", "cp.async.wait_group {n};", [imm("n", range(0, 8))],
    doc="Wait until at most n of this thread's committed cp.async groups are pending.")
row("cp_async_wait_all", "cp.async.wait_all;")
row("cp_async_mbarrier_arrive_noinc", "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [{bar}];", [smem("bar")])
