"""tirxpy/lower/runtime.py gathers the runtime's names from the files that define them."""
import importlib

from tirxpy.lower import runtime


def test_every_name_is_the_defining_modules_object():
    home = {"ArgPacker": "packer", "KINDS": "params", "Kernel": "module", "Launcher": "launcher", "Module": "module",
            "ParamSpec": "params", "arch_for": "device", "cubin_runs_on": "device", "device_arch": "device",
            "ensure_context": "device", "launch": "launcher", "load_module": "module",
            "torch_dtype_name": "params", "_check": "device", "_driver": "device",
            "_launch_ex_ctypes": "launcher", "_make_config": "launcher"}
    assert sorted(runtime.__all__) == sorted(home)
    for name, mod in home.items():
        assert getattr(runtime, name) is getattr(importlib.import_module(f"tirxpy.lower.{mod}"), name), name

