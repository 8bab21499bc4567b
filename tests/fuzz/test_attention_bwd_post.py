"""Fuzz: the dQ store kernel's arguments (:func:`tirxpy_kernels.attention_bwd_post.attention_bwd_dq_store`). One bad
argument among good ones is refused with a :class:`~tirxpy_kernels.errors.KernelConfigError` naming it; good ones
give a kernel whose grid covers the rows and head columns."""
from harness import EXAMPLES, HOSTILE, accept, refuse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tirxpy_kernels.attention_bwd_post import attention_bwd_dq_store

AREA = "tirxpy_kernels attention backward options"
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
NAMES = ("B", "S_", "H", "D", "dtype", "sb", "ss", "PDL")
GOOD = dict(B=2, S_=300, H=4, D=128, dtype="bfloat16", sb=None, ss=None, PDL=True)
JUNK = st.one_of(st.floats(allow_nan=True), st.text(max_size=4), st.lists(st.integers(0, 3), max_size=2),
                 st.just(object()), st.complex_numbers(max_magnitude=4), st.booleans(), HOSTILE)
BAD = {
    "B": st.one_of(JUNK, st.none(), st.integers(max_value=0), st.integers(min_value=65536)),
    "H": st.one_of(JUNK, st.none(), st.integers(max_value=0), st.integers(min_value=1 << 20 + 1)),
    "S_": st.one_of(JUNK, st.none(), st.integers(max_value=63), st.integers(min_value=65535 * 64 + 1)),
    "D": st.one_of(JUNK, st.none(), st.integers(max_value=0), st.integers(1, 4096).filter(lambda d: d % 64)),
    "dtype": st.one_of(JUNK, st.none(), st.sampled_from(["float32", "int8", "bf16", "float8_e4m3", ""])),
    "sb": st.one_of(JUNK, st.integers(max_value=-1), st.integers(0, 10 ** 6).filter(lambda v: v % 8)),
    "ss": st.one_of(JUNK, st.integers(max_value=511), st.integers(512, 10 ** 6).filter(lambda v: v % 8)),
    "PDL": st.one_of(JUNK.filter(lambda v: not isinstance(v, bool)), st.none(),
                     st.integers().filter(lambda i: i not in (0, 1))),
}


@SETTINGS
@given(st.data())
def test_one_bad_argument_is_named(data):
    name = data.draw(st.sampled_from(sorted(BAD)))
    kw = dict(GOOD, **{name: data.draw(BAD[name])})
    refuse(AREA, lambda: attention_bwd_dq_store(*(kw[n] for n in NAMES)), names=[name])


def test_more_column_tiles_than_a_grid_holds_are_named():
    refuse(AREA, lambda: attention_bwd_dq_store(1, 64, 1 << 20, 1 << 20), names=["H * D / 64"])


@SETTINGS
@given(st.integers(1, 8), st.integers(64, 5000), st.integers(1, 16), st.sampled_from([64, 128, 256]),
       st.sampled_from(["bfloat16", "float16"]), st.integers(0, 4))
def test_good_arguments_give_a_covering_grid(B, S_, H, D, dtype, pad):
    ss = H * D + 8 * pad                       # a token stride with room to spare (a packed dqkv slice's)

    def check(k):
        return [int(g) for g in k.launch.grid] == [H * D // 64, -(-S_ // 64), B]
    accept(AREA, lambda: attention_bwd_dq_store(B, S_, H, D, dtype, S_ * ss, ss), check)
