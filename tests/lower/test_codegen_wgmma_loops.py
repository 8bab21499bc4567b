"""Loops that issue wgmma are emitted with ``#pragma unroll 1`` (CPU; the SASS check needs nvdisasm).

ptxas 13.0 (also 13.4) unrolled gemm_sm90's k-loop, left it from the middle of the unrolled body
and scheduled the epilogue's reads of the accumulators of the still-running wgmma group above the
``WARPGROUP.DEPBAR.LE gsb0, 0x0`` of the final ``wgmma.wait_group 0``: wrong first 64-column
chunk with CM=1 on the H100 (docs/performance.md, "Fixed bug: CM=1 results wrong"). The PTX was in
order; the SASS was not.
"""
import os
import re
import shutil
import subprocess

import pytest

import tirxpy
from tirxpy_kernels.gemm_sm90 import gemm_sm90

SHAPES = [((1100, 904, 704), dict(CM=1)), ((1100, 904, 704), dict(CM=1, BN=128, group=1)),
          ((4096, 4096, 4096), dict(CM=1)), ((4096, 4096, 4096), dict(CM=2))]


def _loop_heads(src):
    lines = src.splitlines()
    return [(lines[i - 1].strip(), ln.strip()) for i, ln in enumerate(lines) if ln.strip().startswith("for (")]


@pytest.mark.parametrize("shape,tune", SHAPES[:2])
def test_wgmma_loops_are_kept_rolled(shape, tune):
    src = tirxpy.compile(gemm_sm90(*shape, **tune), arch="sm_90a").cuda_source
    heads = _loop_heads(src)
    rolled = [h for p, h in heads if p == "#pragma unroll 1"]
    # the consumer's tile loop and its k-loop; not the producer's loops (no wgmma there), not the barrier init
    assert any("k_1" in h for h in rolled) and any("i_1" in h for h in rolled), heads
    assert not any(p == "#pragma unroll 1" for p, h in heads if "int32_t s = 0" in h or "int32_t k = 0" in h), heads


def _nvdisasm():
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import nvidia  # noqa: PLC0415
    except ImportError:
        return None
    for root in nvidia.__path__:
        p = os.path.join(root, "cu13", "bin", "nvdisasm")
        if os.path.exists(p):
            return p
    return None


def wgmma_register_hazards(sass: str) -> list:
    """SASS instructions (in program order) that touch the accumulator registers of an HGMMA before a
    ``WARPGROUP.DEPBAR.LE gsb0, 0x0`` (a read or write of registers still being written)."""
    bad, inflight = [], None
    for ln in sass.splitlines():
        m = re.search(r"HGMMA\.64x(\d+)x\d+\.F32\S* R(\d+),", ln)
        if m:
            base = int(m.group(2))
            inflight = set(range(base, base + int(m.group(1)) // 2))
            continue
        if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in ln:
            inflight = None
            continue
        if inflight and "*/" in ln and "WARPGROUP" not in ln and "DEPBAR" not in ln:
            body = ln.split("*/", 1)[1]
            if any(int(r) in inflight for r in re.findall(r"\bR(\d+)\b", body)):
                bad.append(ln.strip())
    return bad


@pytest.mark.parametrize("shape,tune", SHAPES)
def test_no_accumulator_read_before_the_final_wait_in_sass(shape, tune, tmp_path):
    nvdisasm = _nvdisasm()
    if nvdisasm is None:
        pytest.skip("nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")
    k = tirxpy.compile(gemm_sm90(*shape, **tune), arch="sm_90a")
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(k.module.cubin)
    sass = subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    assert "HGMMA" in sass
    assert wgmma_register_hazards(sass) == []
