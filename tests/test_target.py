"""tirxpy.target: one Target object, parsed once, carrying every fact of the part."""
import pytest

from tirxpy.target import (
    MAX_SMEM_PER_CTA, SUPPORTED_ARCHS, Target, TargetError, as_target, for_capability, supported_target,
)


@pytest.mark.parametrize("arch, smem, cluster, tmem, sms", [
    ("sm_80", 166912, 0, 0, 108), ("sm_86", 101376, 0, 0, None), ("sm_90a", 232448, 16, 0, 132),
    ("sm_100a", 232448, 16, 512, 148), ("sm_103a", 232448, 16, 512, 148), ("sm_110a", 232448, 8, 512, None),
    ("sm_120a", 101376, 8, 0, None),
])
def test_facts_per_target(arch, smem, cluster, tmem, sms):
    t = as_target(arch)
    assert (t.smem_per_cta, t.max_cluster, t.tmem_columns, t.sm_count) == (smem, cluster, tmem, sms)
    assert str(t) == t.name == arch and t.capability == divmod(t.sm, 10)


def test_the_loosest_shared_memory_limit_is_the_largest_target_limit():
    assert MAX_SMEM_PER_CTA == max(as_target(a).smem_per_cta for a in SUPPORTED_ARCHS) == 232448


def test_instruction_families_agree_with_the_intrinsic_table():
    from tirxpy.intrinsics import get

    for arch in SUPPORTED_ARCHS:
        t = as_target(arch)
        assert ("wgmma" in t.families) == get("wgmma_fence").supports(t), arch
        assert ("tcgen05" in t.families) == get("tcgen05_alloc_cg1").supports(t), arch
        assert ("setmaxnreg" in t.families) == get("setmaxnreg_inc").supports(t), arch


def test_parsed_once_a_target_passes_through():
    t = as_target("sm_90a")
    assert as_target(t) is t and supported_target(t) is t and as_target("sm_90a") is t   # cached: one object


@pytest.mark.parametrize("bad, msg", [
    ("sm90", "unknown target 'sm90'"), ("SM_90A", "unknown target"), (90, r"unknown target 90 \(int\)"),
    (None, "unknown target None"), ("sm_75", "older than sm_80"), ("sm_90a\n", "unknown target"),
])
def test_bad_targets_are_refused(bad, msg):
    with pytest.raises(TargetError, match=msg):
        as_target(bad)


def test_supported_targets_only_what_nvrtc_compiles_for():
    assert supported_target("sm_100a") == Target(100, "a")
    with pytest.raises(TargetError, match="tirxpy compiles for sm_80, sm_86"):
        supported_target("sm_91")


def test_target_error_is_a_tirx_value_error_and_the_intrinsics_name_is_the_same_class():
    from tirxpy.errors import TirxError
    from tirxpy.intrinsics import TargetError as IntrinsicsTargetError

    assert IntrinsicsTargetError is TargetError and issubclass(TargetError, (TirxError, ValueError))


@pytest.mark.parametrize("arch, cap, ok", [
    ("sm_80", (8, 6), True), ("sm_80", (9, 0), False), ("sm_90a", (9, 0), True), ("sm_90a", (10, 0), False),
    ("sm_86", (8, 0), False), ("sm_100a", (10, 3), False),
])
def test_runs_on(arch, cap, ok):
    assert as_target(arch).runs_on(cap) is ok


def test_for_capability():
    assert [str(for_capability(c)) for c in [(9, 0), (10, 0), (8, 9)]] == ["sm_90a", "sm_100a", "sm_89"]


class _BadIndex:
    def __index__(self):
        raise RuntimeError("no index")


@pytest.mark.parametrize("cap", [5, None, "90", (9,), (9, 0, 0), (9.0, 0), (True, False), (-9, 0), (9, 10), (0, 80),
                                 [_BadIndex(), 0], {9: 0}])
def test_capabilities_that_are_no_int_pair_are_refused(cap):
    with pytest.raises(TargetError, match=r"compute capability is a \(major, minor\) pair of ints, minor below 10"):
        for_capability(cap)
    with pytest.raises(TargetError, match=r"Target.runs_on: a compute capability"):
        as_target("sm_90a").runs_on(cap)


def test_capabilities_of_numpy_ints_and_lists_are_read():
    np = pytest.importorskip("numpy")
    assert str(for_capability((np.int64(9), np.int32(0)))) == "sm_90a" and as_target("sm_80").runs_on([8, 6])


@pytest.mark.parametrize("arch", ["sm_\u0669\u0660a", "sm_\uff19\uff10", "sm_9\u06f0"])
def test_only_ascii_digits_name_a_target(arch):
    with pytest.raises(TargetError, match="unknown target"):
        supported_target(arch)


@pytest.mark.parametrize("sm, suffix", [("90", "a"), (90.0, ""), (True, ""), (-1, ""), (90, "b"), (90, None)])
def test_a_target_built_by_hand_is_checked(sm, suffix):
    with pytest.raises(TargetError, match="is no target: sm is an int"):
        Target(sm, suffix)
