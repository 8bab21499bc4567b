"""``python -m kernels <bench> ...`` is ``python -m kernels.bench <bench> ...``."""
import sys

from .bench import main

sys.exit(main(prog="python -m kernels"))
