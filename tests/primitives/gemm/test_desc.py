"""tirxpy/primitives/gemm/desc.py: the descriptor intrinsics and the IR that starts a static descriptor at an element."""
from types import SimpleNamespace

from tirxpy.intrinsics import get
from tirxpy.intrinsics.descriptors import smem_desc
from tirxpy.ir import Buffer, expr as E
from tirxpy.layout.atoms import mma_smem_layout
from tirxpy.primitives.gemm import desc


def test_intrinsics_are_registered_with_their_operand_kinds():
    e = get(desc.NAME)
    assert [(o.name, o.kind) for o in e.args] == [("addr", "smem_addr"), ("desc0", "reg")]
    f = get(desc.FOLDED)
    assert [(o.name, o.kind) for o in f.args] == [("addr", "smem_addr16"), ("desc0", "reg")]
    assert e.render_call(["a", "d"]) == "tx_gemm_smem_desc(a, d)"


def test_folded_formula_adds_the_16_byte_address_to_the_low_word_only():
    helper = get(desc.FOLDED).render_helper()
    assert "(((desc0 >> 32) << 32) | (unsigned)((unsigned)desc0 + addr))" in helper
    d0 = 0x4000004000010000                 # start-address field (bits 0-13) zero
    for addr in (0, 0x40, 0x3FFF0):         # shared::cta addresses < 2^18
        folded = ((d0 >> 32) << 32) | ((d0 + (addr >> 4)) & 0xFFFFFFFF)
        assert folded == d0 | ((addr & 0x3FFFF) >> 4)     # the same as the asm form's OR


def test_static_desc_is_smem_desc_of_the_operand():
    L = mma_smem_layout(64, 64, "bfloat16", "K", 128)
    op = SimpleNamespace(layout=L, dtype="bfloat16", major="K", shape=(64, 64))
    assert desc.static_desc("wgmma", op) == smem_desc("wgmma", L, "bfloat16", major="K", shape=(64, 64))


def test_desc_at_builds_the_intrinsic_call_on_the_element_address():
    seen = []
    ctx = SimpleNamespace(intrin=lambda name, *args: seen.append((name, args)) or name)
    s = Buffer("s", (64, 64), "bfloat16", storage="shared")
    el = s[1, 8]
    assert desc.desc_at(ctx, 0x10, el) == desc.NAME
    assert desc.desc_at(ctx, 0x10, el, folded=True) == desc.FOLDED
    for _, (addr, d0) in seen:
        assert isinstance(addr, E.AddressOf) and addr.target is el
        assert int(d0.value) == 0x10 and d0.dtype.name == "uint64"
