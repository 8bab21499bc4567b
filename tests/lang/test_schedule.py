"""tirxpy/lang/schedule.py and the register split of tirxpy/lang/roles.py: the setmaxnreg check and the split tile walk (the grouped walk is
tested with the GEMM, tests/kernels/test_gemm_sm90.py)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tirxpy.lang.schedule import split_tile
from tirxpy.lang import register_split


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
    (200, 24, 240, "needs whole warpgroups, two to eight; got 200 threads"),
    (128, 24, 240, "two to eight; got 128 threads"),
])
def test_splits_that_do_not_fit_are_refused(threads, dec, inc, msg):
    with pytest.raises(ValueError) as e:
        register_split(threads, dec, inc, "k")
    assert msg in str(e.value) and str(e.value).startswith("k: ")


@settings(max_examples=60, deadline=None)
@given(num_m=st.integers(1, 9), num_n=st.integers(1, 7), group=st.integers(1, 5), data=st.data())
def test_split_tile_walk_covers_each_output_column_once(num_m, num_n, group, data):
    """split_tile lists every tile of the split grid once: the split rows' ``wide`` tiles of ``bn`` and their
    ``narrow`` tiles of ``bn2`` tile ``[0, wide bn + narrow bn2)`` without gaps or overlaps, the other rows
    the plain ``num_n`` tiles of ``bn``; and the kernel's cost model lists the same widths in the same order."""
    from tirxpy_kernels.gemm_sm90 import _split_widths

    bn = 64
    rows = data.draw(st.integers(1, num_m))
    wide = data.draw(st.integers(0, num_n))
    narrow = data.draw(st.integers(1, 8))
    bn2 = data.draw(st.sampled_from([16, 32, 48]))
    split = (rows, wide, narrow, bn2)
    total = rows * (wide + narrow) + (num_m - rows) * num_n
    walk = [split_tile(t, num_m, num_n, group, split, bn) for t in range(total)]
    cols = {}
    for tm, n0, is_wide in walk:
        cols.setdefault(tm, []).append((n0, n0 + (bn if is_wide else bn2)))
    assert sorted(cols) == list(range(num_m))
    for tm, spans in cols.items():
        spans.sort()
        end = (wide * bn + narrow * bn2) if tm < rows else num_n * bn
        assert spans[0][0] == 0 and spans[-1][1] == end
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), spans
    widths = _split_widths(rows, wide, narrow, bn2, num_m, num_n, bn, group)
    assert [bn if w else bn2 for _, _, w in walk] == list(widths)
