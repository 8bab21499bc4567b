"""Fuzz: the preprocessing kernels' arguments (:func:`tirxpy_kernels.attention_bwd_pre.attention_bwd_preprocess` and
``attention_bwd_preprocess_packed``). One bad argument among good ones is refused with a
:class:`~tirxpy_kernels.errors.KernelConfigError` naming it; good ones give a kernel whose grid covers the rows."""
from harness import EXAMPLES, HOSTILE, accept, refuse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tirxpy_kernels.attention_bwd_pre import attention_bwd_preprocess, attention_bwd_preprocess_packed

AREA = "tirxpy_kernels attention backward options"
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
NAMES = ("B", "H", "SQ", "D", "dtype", "SQT", "PDL")
GOOD = dict(B=2, H=4, SQ=300, D=128, dtype="bfloat16", SQT=None, PDL=True)
JUNK = st.one_of(st.floats(allow_nan=True), st.text(max_size=4), st.lists(st.integers(0, 3), max_size=2),
                 st.just(object()), st.complex_numbers(max_magnitude=4), HOSTILE)
BAD = {
    "B": st.one_of(JUNK, st.booleans(), st.none(), st.integers(max_value=0), st.integers(min_value=65536)),
    "H": st.one_of(JUNK, st.booleans(), st.none(), st.integers(max_value=0), st.integers(min_value=65536)),
    "SQ": st.one_of(JUNK, st.booleans(), st.none(), st.integers(max_value=0)),
    "D": st.one_of(JUNK, st.booleans(), st.none(), st.integers(max_value=0),
                   st.integers(1, 4096).filter(lambda d: d % 64)),
    "dtype": st.one_of(JUNK, st.none(), st.sampled_from(["float32", "int8", "bf16", "float8_e4m3", ""])),
    "SQT": st.one_of(JUNK, st.booleans(), st.integers(max_value=299)),
    "PDL": st.one_of(JUNK, st.none(), st.integers().filter(lambda i: i not in (0, 1))),
}


@SETTINGS
@given(st.data())
def test_one_bad_argument_is_named(data):
    name = data.draw(st.sampled_from(sorted(BAD)))
    kw = dict(GOOD, **{name: data.draw(BAD[name])})
    refuse(AREA, lambda: attention_bwd_preprocess(*(kw[n] for n in NAMES)), names=[name])


@SETTINGS
@given(st.integers(1, 8), st.integers(1, 5000), st.integers(1, 16), st.sampled_from([64, 128, 256]),
       st.sampled_from(["bfloat16", "float16"]), st.integers(0, 100), st.booleans())
def test_good_arguments_give_a_covering_grid(B, SQ, H, D, dtype, pad, pdl):
    def check(k):
        return [int(g) for g in k.launch.grid] == [-(-SQ // 64), H, B] and k.launch.pdl == pdl
    accept(AREA, lambda: attention_bwd_preprocess(B, H, SQ, D, dtype, SQ + pad, pdl), check)


@SETTINGS
@given(st.sampled_from(["B", "H", "SQ", "D", "dtype", "PDL"]), st.data())
def test_the_packed_kernel_names_a_bad_argument(name, data):
    kw = dict(B=3, H=2, TQ=1000, D=64, SQ=300, XQ=320, dtype="bfloat16", PDL=True)
    kw[name] = data.draw(BAD[name])
    refuse(AREA, lambda: attention_bwd_preprocess_packed(**kw), names=[name])
