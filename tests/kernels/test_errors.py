"""tirxpy_kernels.errors: one KernelConfigError for the kernel library (a TirxError and a ValueError), and the option
checks that name the option."""
import pytest

from tirxpy_kernels.errors import KernelConfigError, choice_option, flag_option, int_option
from tirxpy.errors import TirxError


def test_the_error_is_a_tirx_error_and_a_value_error():
    assert issubclass(KernelConfigError, TirxError) and issubclass(KernelConfigError, ValueError)


def test_int_option():
    import numpy as np

    assert int_option("k", "BN", np.int64(64), lo=16, hi=256) == 64 and type(int_option("k", "BN", np.int64(64))) is int
    assert int_option("k", "STAGES", None, none=True) is None
    for v, msg in ((True, "k: BN must be an int, got True (bool)"), (2.0, "k: BN must be an int, got 2.0 (float)"),
                   ("4", "k: BN must be an int, got '4' (str)"), (None, "k: BN must be an int, got None"),
                   (8, "k: BN = 8 is out of range; it must be in [16, 256]"),
                   (512, "k: BN = 512 is out of range; it must be in [16, 256]")):
        with pytest.raises(KernelConfigError) as e:
            int_option("k", "BN", v, lo=16, hi=256)
        assert str(e.value).startswith(msg)
    with pytest.raises(KernelConfigError, match="k: n = 0 is out of range; it must be >= 1"):
        int_option("k", "n", 0, lo=1)
    with pytest.raises(KernelConfigError, match="k: STAGES must be an int or None, got \\[1\\]"):
        int_option("k", "STAGES", [1], none=True)


class _Hostile(int):
    """An int subclass whose comparisons, arithmetic and repr are its own code, each raising."""
    def _raise(self, *args):
        raise ZeroDivisionError("the value's own code ran")

    __lt__ = __le__ = __gt__ = __ge__ = __mod__ = __add__ = __mul__ = __floordiv__ = __repr__ = _raise
    __hash__ = int.__hash__


def test_an_integral_of_another_type_is_refused_before_its_code_runs():
    """Only Python ints and numpy integers count as ints: the checks never compare, reduce or print another
    Integral's value with its own methods (an int subclass whose ``__mod__`` raised escaped from ``BN % 16``)."""
    import numpy as np

    from tirxpy_kernels.errors import is_int, plain_ints, shown
    from tirxpy_kernels.gemm_plan import check_options
    from tirxpy_kernels.attention_plan import check_options as attention_options
    from tirxpy_kernels.launch_cache import LaunchCache

    v = _Hostile(128)
    assert [is_int(x) for x in (128, np.int32(1), np.uint8(1), v, True, np.bool_(True), 1.0)] == [True] * 3 + [False] * 4
    assert plain_ints(v)[0] is v and shown(v) == "<_Hostile object>"
    for fn, msg in ((lambda: int_option("k", "BN", v), "k: BN must be an int, got <_Hostile object> (_Hostile)"),
                    (lambda: flag_option("k", "F", v), "k: F must be True or False, got <_Hostile object>"),
                    (lambda: check_options(BN=v), "gemm_sm90: BN must be an int"),
                    (lambda: check_options(CM=v), "gemm_sm90: CM must be an int"),
                    (lambda: attention_options(BN=v), "attention_sm90: BN must be an int or None"),
                    (lambda: attention_options(sms=v), "attention_sm90: sms = <_Hostile object> must be"),
                    (lambda: check_options(SPLIT=(v, 1, 240)), "gemm_sm90: SPLIT must be a tuple (rows, wide, bn2) of "
                     "ints, got (<_Hostile object>, 1, 240)"),
                    (lambda: LaunchCache("k", v), "LaunchCache 'k': max_entries must be an int >= 1, got <_Hostile")):
        with pytest.raises(KernelConfigError) as e:
            fn()
        assert str(e.value).startswith(msg), e.value


def test_flag_and_choice_options():
    assert [flag_option("k", "F", v) for v in (True, False, 1, 0)] == [True, False, True, False]
    for v in (2, -1, 0.5, "True", None, [1]):
        with pytest.raises(KernelConfigError, match="k: F must be True or False, got "):
            flag_option("k", "F", v)
    assert choice_option("k", "act", None, (None, "relu")) is None and choice_option("k", "act", "relu", (None, "relu"))
    for v in (["relu"], 1, "gelu", b"relu"):
        with pytest.raises(KernelConfigError, match="k: act must be one of \\(None, 'relu'\\)"):
            choice_option("k", "act", v, (None, "relu"))


def test_a_numpy_bool_is_a_flag_and_goes_on_as_a_python_bool():
    import numpy as np

    from tirxpy_kernels.errors import is_flag, plain_flags

    for v in (np.bool_(True), np.bool_(False)):
        got = flag_option("k", "causal", v)
        assert type(got) is bool and got == bool(v)
    assert [is_flag(v) for v in (True, np.bool_(True), 1, np.int64(1), 0.0, None)] == [True, True] + [False] * 4
    assert [type(v) for v in plain_flags(np.bool_(True), np.int64(1), None)] == [bool, np.int64, type(None)]
    for v in (np.int64(2), np.float64(1.0), np.array([True])):
        with pytest.raises(KernelConfigError, match="k: causal must be True or False, got "):
            flag_option("k", "causal", v)


def test_every_kernel_module_raises_it():
    """The factories and plans raise KernelConfigError (still a ValueError for older callers)."""
    from tirxpy_kernels.attention_plan import plan as attention_plan
    from tirxpy_kernels.attention_sm90 import attention_sm90
    from tirxpy_kernels.gemm_sm90 import check_config, plan
    from tirxpy_kernels.gemm_sm100 import gemm_sm100
    from tirxpy_kernels.prebuild import prebuild_one
    from tirxpy_kernels.rmsnorm_silu import plan as rms_plan

    cases = [(lambda: plan(512, 512, 512, BN=100), "BN = 100"), (lambda: check_config(512, 512, 512, group=0), "group"),
             (lambda: check_config(512, 512, 512, DEFER=["on"]), "DEFER"),
             (lambda: check_config(512, 512, 512, drop="nope"), "unknown drop"),
             (lambda: check_config(512.0, 512, 512), "M must be an int"),
             (lambda: attention_plan(1, 4, 2, 128, 128, 64, NC=[2]), "NC must be an int"),
             (lambda: attention_plan(1, 4, 2, 128, 128, 64, dtype=["bfloat16"]), "dtype must be one of"),
             (lambda: attention_sm90(1, 4, 2, 128, 128, 64, PDL="yes"), "PDL must be True or False"),
             (lambda: gemm_sm100(256, 256, 128, BN=40), "BN = 40"), (lambda: rms_plan(33), "row width 33"),
             (lambda: prebuild_one(("conv",)), "unknown kernel kind 'conv'")]
    for fn, msg in cases:
        with pytest.raises(KernelConfigError, match=msg):
            fn()
