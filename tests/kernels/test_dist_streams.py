"""The side-stream operations (tirxpy_kernels/dist_streams.py): each reaches the driver once with the stream's
handle, the addresses and values given; a refused call raises the error class given, naming the operation, the
driver's error and the fallback. The driver is a stand-in here (no GPU); tests/kernels/test_dist_gpu.py runs the
real one under both transfers."""
import ctypes

import pytest

from tirxpy_kernels.dist_streams import ENTRY, GEQ, WRITE_DEFAULT, StreamOps


class _Lib:
    """A stand-in libcuda: records each call as ``(entry point, args)`` and returns ``result`` (0: success)."""

    def __init__(self, result=0, names=None):
        self.calls, self.result, self.names = [], result, names or {}

    def __getattr__(self, name):
        if name == "cuGetErrorName":
            def error_name(code, out):
                text = self.names.get(code.value)
                if text is None:
                    return 1
                ctypes.cast(out, ctypes.POINTER(ctypes.c_char_p))[0] = text
                return 0
            return error_name

        def call(*args):
            self.calls.append((name, args))
            return self.result
        return call


def _ops(result=0, names=None):
    return StreamOps(77, LookupError, "transfer='push'", events=(501, 502), lib=_Lib(result, names))


def test_each_operation_is_one_driver_call_on_the_stream():
    ops = _ops()
    ops.wait_geq(4096, 7)
    ops.write(4100, 3)
    ops.copy(1 << 40, 1 << 41, 65536)
    assert ops._lib.calls == [(ENTRY["wait"], (77, 4096, 7, GEQ)), (ENTRY["write"], (77, 4100, 3, WRITE_DEFAULT)),
                              (ENTRY["copy"], (1 << 40, 1 << 41, 65536, 77))]


def test_follow_and_join_order_the_two_streams_through_their_own_event():
    ops = _ops()
    ops.follow(9)          # the side stream (77) waits for stream 9's work so far
    ops.join(9)            # stream 9 waits for the side stream's work so far
    assert ops._lib.calls == [(ENTRY["record"], (501, 9)), (ENTRY["wait_event"], (77, 501, 0)),
                              (ENTRY["record"], (502, 77)), (ENTRY["wait_event"], (9, 502, 0))]


@pytest.mark.parametrize("op,args,what", [("wait_geq", (8, 1), "cuStreamWaitValue32 on a flag"),
                                          ("write", (8, 1), "cuStreamWriteValue32 on a flag"),
                                          ("copy", (8, 16, 512), "cuMemcpyDtoDAsync of 512 bytes"),
                                          ("follow", (5,), "an event wait between the caller's stream and the side "
                                                           "stream")])
def test_a_refused_call_names_the_operation_the_error_and_the_fallback(op, args, what):
    ops = _ops(801, {801: b"CUDA_ERROR_NOT_SUPPORTED"})
    with pytest.raises(LookupError) as e:
        getattr(ops, op)(*args)
    assert str(e.value) == (f"{what} failed (CUDA_ERROR_NOT_SUPPORTED); pass transfer='push' to move the data with "
                            "the kernel's own warps")


def test_an_error_the_driver_cannot_name_is_given_by_its_code():
    with pytest.raises(LookupError, match=r"cuStreamWriteValue32 on a flag failed \(CUresult 999\)"):
        _ops(999).write(8, 1)


def test_a_refused_record_skips_the_wait():
    ops = _ops(700)
    with pytest.raises(LookupError):
        ops.join(3)
    assert [c[0] for c in ops._lib.calls] == [ENTRY["record"]]


def test_without_libcuda_the_error_names_the_fallback(monkeypatch):
    import tirxpy.lower.device as device

    monkeypatch.setattr(device, "libcuda", lambda: None)
    with pytest.raises(LookupError, match="libcuda.so.1 cannot be opened with ctypes.*pass transfer='push'"):
        StreamOps(1, LookupError, "transfer='push'")
