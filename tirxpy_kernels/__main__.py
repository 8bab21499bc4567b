"""``python -m tirxpy_kernels <bench> ...`` is ``python -m tirxpy_kernels.bench <bench> ...``."""
import sys

from .bench import main

sys.exit(main(prog="python -m tirxpy_kernels"))
