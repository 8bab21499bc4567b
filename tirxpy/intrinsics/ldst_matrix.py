"""ldmatrix / stmatrix: warp-collective 8x8 b16 matrix loads from / stores to shared memory."""
from .defs import out, reg, row, smem

for _n in (1, 2, 4):
    for _trans in (False, True):
        _t = ".trans" if _trans else ""
        _s = "_trans" if _trans else ""
        row(f"ldmatrix_x{_n}{_s}", f"ldmatrix.sync.aligned.m8n8.x{_n}{_t}.shared.b16 {{d}}, [{{addr}}];",
            [out("d", "uint32", _n), smem("addr")], scope="warp",
            doc=f"Load {_n} 8x8 b16 matrices; lane l gives the row address of row l%8 of matrix l//8.")
        row(f"stmatrix_x{_n}{_s}", f"stmatrix.sync.aligned.m8n8.x{_n}{_t}.shared.b16 [{{addr}}], {{s}};",
            [smem("addr"), reg("s", "uint32", _n)], scope="warp", lowest="sm_90")
