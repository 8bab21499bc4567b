"""tirxpy.testing: hypothesis stays optional; a missing one is a typed error naming the install."""
import subprocess
import sys

import tirxpy.testing as tt
from tirxpy.errors import TirxError

BLOCK = ("import sys; sys.modules['hypothesis'] = None\n"
         "import tirxpy\n"
         "from tirxpy.primitives import ops\n"
         "assert ops()\n"
         "try:\n"
         "    import tirxpy.testing\n"
         "except ImportError as e:\n"
         "    from tirxpy.errors import TirxError\n"
         "    print(type(e).__name__, isinstance(e, TirxError), e.name, '|', e)\n")


def test_without_hypothesis_import_tirxpy_works_and_testing_says_pip_install():
    r = subprocess.run([sys.executable, "-c", BLOCK], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("MissingDependencyError True hypothesis |"), r.stdout
    assert "pip install hypothesis" in r.stdout


def test_the_error_type_is_an_import_error_and_a_tirx_error():
    assert issubclass(tt.MissingDependencyError, ImportError) and issubclass(tt.MissingDependencyError, TirxError)


def test_exports_are_the_documented_names():
    for name in tt.__all__:
        assert getattr(tt, name) is not None
    assert {"tile_layouts", "swizzled_layouts", "hardware_atoms", "shapes", "kernel_args"} <= set(tt.__all__)
