"""The side-stream operations (tirxpy_kernels/dist_streams.py): each reaches the driver once with the stream's
handle, the addresses and values given; a refused call raises the error class given, naming the operation, the
driver's error and the fallback. The driver is a stand-in here (no GPU); tests/kernels/test_dist_gpu.py runs the
real one under both transfers."""
import enum

import pytest

from tirxpy_kernels.dist_streams import StreamOps


class _Result(enum.Enum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_NOT_SUPPORTED = 801


class _Driver:
    """Records each call as (name, stream, args); returns ``result``."""

    def __init__(self, result=_Result.CUDA_SUCCESS):
        self.calls, self.result = [], result

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, args))
            return (self.result,)
        return call


def _ops(result=_Result.CUDA_SUCCESS):
    ops = StreamOps(77, LookupError, "transfer='push'")
    ops._driver, ops._ok, ops._ptr = _Driver(result), _Result.CUDA_SUCCESS, int
    return ops


def test_each_operation_is_one_driver_call_on_the_stream():
    ops = _ops()
    ops.wait_geq(4096, 7)
    ops.write(4100, 3)
    ops.copy(1 << 40, 1 << 41, 65536)
    names = [c[0] for c in ops._driver.calls]
    assert names == ["cuStreamWaitValue32", "cuStreamWriteValue32", "cuMemcpyDtoDAsync"]
    wait, write, copy = (c[1] for c in ops._driver.calls)
    assert int(wait[0]) == 77 and wait[1:3] == (4096, 7) and "GEQ" in wait[3].name
    assert int(write[0]) == 77 and write[1:3] == (4100, 3)
    assert copy[:3] == (1 << 40, 1 << 41, 65536) and int(copy[3]) == 77


@pytest.mark.parametrize("op,args,what", [("wait_geq", (8, 1), "cuStreamWaitValue32 on a flag"),
                                          ("write", (8, 1), "cuStreamWriteValue32 on a flag"),
                                          ("copy", (8, 16, 512), "cuMemcpyDtoDAsync of 512 bytes")])
def test_a_refused_call_names_the_operation_the_error_and_the_fallback(op, args, what):
    ops = _ops(_Result.CUDA_ERROR_NOT_SUPPORTED)
    with pytest.raises(LookupError) as e:
        getattr(ops, op)(*args)
    assert str(e.value) == (f"{what} failed (CUDA_ERROR_NOT_SUPPORTED); pass transfer='push' to move the data with "
                            "the kernel's own warps")
