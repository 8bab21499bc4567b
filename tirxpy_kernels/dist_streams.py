"""The side-stream operations of the distributed GEMMs' copy-engine transfers (:mod:`tirxpy_kernels.dist_api`),
issued through the CUDA driver with the stream's handle built once, so that each costs a few microseconds of host
time (a torch ``copy_`` of two slices and a driver call that builds its handles every time cost several times more):

- ``wait_geq(flag, value)``: hold the stream until the 32-bit flag at address ``flag`` is ``>= value``
  (``cuStreamWaitValue32``, GEQ);
- ``write(flag, value)``: store ``value`` there in stream order, after a memory fence (``cuStreamWriteValue32``);
- ``copy(dst, src, nbytes)``: a device-to-device copy (``cuMemcpyDtoDAsync``, run by the copy engines), between
  NVLink peers too: a peer's symmetric-memory buffer has a device address in this process.

Addresses are ints (``tensor.data_ptr()`` plus a byte offset). A call the driver refuses raises ``error`` (the
class given) naming the operation, the driver's error and ``fallback``, what to pass instead.

    >>> ops = StreamOps(0, ValueError, "transfer='push'")     # nothing reaches the driver before a call
    >>> ops.fallback
    "transfer='push'"
"""
from __future__ import annotations


class StreamOps:
    """Flag waits, flag writes and copies on one CUDA stream (``stream``: its handle, ``torch.cuda.Stream.cuda_stream``)."""

    def __init__(self, stream: int, error: type, fallback: str):
        from cuda.bindings import driver

        self._driver = driver
        self._stream = driver.CUstream(stream)
        self._ptr = driver.CUdeviceptr
        self._geq = driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ
        self._plain = driver.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_DEFAULT
        self._ok = driver.CUresult.CUDA_SUCCESS
        self.error, self.fallback = error, fallback

    def wait_geq(self, flag: int, value: int) -> None:
        err, = self._driver.cuStreamWaitValue32(self._stream, self._ptr(flag), value, self._geq)
        if err != self._ok:
            self._fail("cuStreamWaitValue32 on a flag", err)

    def write(self, flag: int, value: int) -> None:
        err, = self._driver.cuStreamWriteValue32(self._stream, self._ptr(flag), value, self._plain)
        if err != self._ok:
            self._fail("cuStreamWriteValue32 on a flag", err)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        err, = self._driver.cuMemcpyDtoDAsync(self._ptr(dst), self._ptr(src), nbytes, self._stream)
        if err != self._ok:
            self._fail(f"cuMemcpyDtoDAsync of {nbytes} bytes", err)

    def _fail(self, what, err):
        raise self.error(f"{what} failed ({getattr(err, 'name', err)}); pass {self.fallback} to move the data with "
                         "the kernel's own warps")
