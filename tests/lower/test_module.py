"""Loading cubins (tirxpy/lower/module.py); no GPU needed."""
import pytest
import torch

from tirxpy.lower.errors import DriverError, LaunchError


def test_no_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    from tirxpy.lower.module import load_module

    with pytest.raises(DriverError, match="no CUDA GPU is available"):
        load_module(b"\x7fELF")


def test_loading_a_cubin_for_another_arch_says_which_arch_to_build(monkeypatch):
    import torch

    from tirxpy.lower import module

    class Compiled:
        arch, cubin = "sm_80", b"\0"

    monkeypatch.setattr(module, "ensure_context", lambda device: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda idx=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda idx=None: "NVIDIA H100")
    with pytest.raises(LaunchError, match=r"compiled for sm_80, but GPU 0 \(NVIDIA H100\) is sm_90.*arch='sm_90a'"):
        module.load_module(Compiled())
