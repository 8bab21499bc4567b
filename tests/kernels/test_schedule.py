"""kernels/schedule.py: the setmaxnreg register split check (the tile walks are tested with the
GEMM, tests/kernels/test_gemm_sm90.py)."""
import pytest

from kernels.schedule import register_split


@pytest.mark.parametrize("threads,dec,inc", [
    (384, 40, 232),     # the GEMM: 5120 + 59392 = 64512 = 384 x 168
    (384, 24, 240),     # attention: 3072 + 61440 = 64512
    (384, 48, 224),     # persistent attention at head dim 256: 6144 + 57344 = 63488
    (512, 32, 160),     # three consumers: 4096 + 61440 = 65536 = 512 x 128
    (256, 40, 232),
])
def test_splits_that_fit_the_launch_allocation(threads, dec, inc):
    assert register_split(threads, dec, inc) == (dec, inc)


@pytest.mark.parametrize("threads,dec,inc,msg", [
    # 6144 + 59392 = 65536 > 64512: this split hung the H100 (the consumers' setmaxnreg.inc never returned)
    (384, 48, 232, "setmaxnreg 48 / 232 needs 65536 registers, over the CTA's 64512 (384 threads x 168)"),
    (512, 40, 160, "needs 66560 registers, over the CTA's 65536 (512 threads x 128)"),
    (384, 20, 240, "setmaxnreg dec = 20 must be a multiple of 8 in [24, 256]"),
    (384, 24, 244, "setmaxnreg inc = 244 must be a multiple of 8"),
    (200, 24, 240, "needs whole warpgroups, at least two; got 200 threads"),
    (128, 24, 240, "at least two; got 128 threads"),
])
def test_splits_that_do_not_fit_are_refused(threads, dec, inc, msg):
    with pytest.raises(ValueError) as e:
        register_split(threads, dec, inc, "k")
    assert msg in str(e.value) and str(e.value).startswith("k: ")
