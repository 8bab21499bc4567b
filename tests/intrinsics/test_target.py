import pytest

import tirxpy.intrinsics as I
from tirxpy.intrinsics.target import Arch, Requirement, parse_arch


def test_parse_arch():
    assert parse_arch("sm_90a") == Arch(90, "a")
    assert parse_arch("sm_100a") == Arch(100, "a")
    assert str(parse_arch("sm_80")) == "sm_80"


@pytest.mark.parametrize("bad", ["sm90", "compute_90", "sm_9", 90, None])
def test_parse_arch_rejects_garbage(bad):
    with pytest.raises(I.TargetError, match="unknown target"):
        parse_arch(bad)


def test_parse_arch_rejects_old():
    with pytest.raises(I.TargetError, match="older than sm_80"):
        parse_arch("sm_75")


def test_messages():
    assert I.get("wgmma_m64n64k16_f32_bf16_bf16_ss").requirement.missing("sm_90a") is None
    with pytest.raises(I.TargetError) as ei:
        I.get("wgmma_fence").check_target("sm_80")
    assert str(ei.value) == "wgmma.fence needs sm_90a; the kernel targets sm_80 — compile with arch='sm_90a'"
    with pytest.raises(I.TargetError, match=r"exists only on sm_90a \(Blackwell uses tcgen05.mma instead\); "
                                            r"the kernel targets sm_100a"):
        I.get("wgmma_fence").check_target("sm_100a")
    with pytest.raises(I.TargetError, match="arch-specific 'a' features.*compile with arch='sm_90a'"):
        I.get("setmaxnreg_dec").check_target("sm_90")
    with pytest.raises(I.TargetError, match="tcgen05 is absent from consumer Blackwell"):
        I.get("tcgen05_wait_ld").check_target("sm_120a")


def test_supported_on_newer():
    assert I.get("mbarrier_init").supports("sm_100a")
    assert I.get("setmaxnreg_inc").supports("sm_100a")
    assert I.get("tma_load_2d_multicast").supports("sm_100a")
    assert not I.get("tcgen05_commit_cg1").supports("sm_90a")
    assert str(Requirement("sm_90a", "sm_90a")) == "sm_90a..sm_90a"
