"""GPU: swizzled shared tiles sit at 1024-byte aligned *absolute* shared addresses.

Layouts (and the simulator) swizzle buffer-relative coordinates; the hardware (TMA, wgmma
descriptors) swizzles absolute shared::cta address bits. The two agree only when every swizzled
buffer starts on a swizzle period (1024 B for 128B swizzle): this checks the dynamic shared
memory base the launch really gets, with and without a cluster and with large allocations.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("cluster", [None, (2, 1, 1)])
@pytest.mark.parametrize("big", [False, True])
def test_swizzled_shared_tiles_are_1024_byte_aligned(cluster, big):
    from tirxpy import T, compile
    from tirxpy.layout import ComposeLayout, S, TileLayout, swizzle_128B
    from tirxpy.lower.runtime import device_arch

    rows = 512 if big else 64
    sw = ComposeLayout(swizzle_128B("bfloat16"), TileLayout(S[(rows, 64)]))
    launch = dict(grid=(2,), threads=32) if cluster is None else dict(grid=(2,), threads=32, cluster=cluster)

    @T.prim_func
    def probe(Out: T.Tensor((2, 2), "uint32")):
        T.launch(**launch)
        pad = T.alloc_shared((40,), "uint8")
        tile = T.alloc_shared((rows, 64), "bfloat16", layout=sw)
        tile2 = T.alloc_shared((rows, 64), "bfloat16", layout=sw)
        if T.thread_id() == 0:
            pad[0] = T.uint8(1)
            Out[T.cta_id(0), 0] = T.cast(T.address_of(tile[0, 0]), "uint32")
            Out[T.cta_id(0), 1] = T.cast(T.address_of(tile2[0, 0]), "uint32")

    k = compile(probe, arch=device_arch())
    out = torch.full((2, 2), 7, dtype=torch.int32, device="cuda").view(torch.uint32)
    k(out)
    torch.cuda.synchronize()
    addrs = out.view(torch.int32).cpu().tolist()
    assert all(a % 1024 == 0 for row in addrs for a in row), (addrs, k.smem_bytes)
