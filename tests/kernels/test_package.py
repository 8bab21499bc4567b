"""tirxpy_kernels/__init__.py: the package's public functions stay functions once every submodule is imported (a
submodule named like one of them would replace it on the package: ``import tirxpy_kernels.x`` binds ``x``)."""
import importlib
import inspect
import pkgutil

import tirxpy_kernels


def test_public_functions_are_not_shadowed_by_submodules():
    public = {n: f for n, f in vars(tirxpy_kernels).items() if inspect.isfunction(f) and not n.startswith("_")}
    assert {"gemm", "gemm_fp8", "attention", "quantize_fp8"} <= set(public)
    modules = [m.name for m in pkgutil.iter_modules(tirxpy_kernels.__path__)]
    assert not set(public) & set(modules), set(public) & set(modules)
    for m in modules:
        if m != "__main__":
            importlib.import_module(f"tirxpy_kernels.{m}")
    for name in public:
        assert inspect.isfunction(getattr(tirxpy_kernels, name)), name
