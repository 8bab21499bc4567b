"""The side-stream operations of the distributed GEMMs' copy-engine transfers (:mod:`tirxpy_kernels.dist_api`),
each one call of libcuda through ctypes with its handles built once (the ``cuda.bindings`` wrappers build an
object per argument and per result on every call):

- ``wait_geq(flag, value)``: hold the stream until the 32-bit flag at address ``flag`` is ``>= value``
  (``cuStreamWaitValue32``, GEQ);
- ``write(flag, value)``: store ``value`` there in stream order, after a memory fence (``cuStreamWriteValue32``);
- ``copy(dst, src, nbytes)``: a device-to-device copy (``cuMemcpyDtoDAsync``, run by the copy engines), between
  NVLink peers too: a peer's symmetric-memory buffer has a device address in this process;
- ``follow(other)``: the stream waits for the work queued on stream ``other`` so far; ``join(other)``: ``other``
  waits for the work queued on this stream so far (an event recorded on one, waited on by the other; the two
  events are made once, with the stream: ``events``).

Addresses are ints (``tensor.data_ptr()`` plus a byte offset); streams are raw handles
(``torch.cuda.Stream.cuda_stream``). A call the driver refuses raises ``error`` (the class given) naming the
operation, the driver's error and ``fallback``, what to pass instead.

    >>> class Driver:                    # a stand-in libcuda: every entry point succeeds (returns 0)
    ...     def __getattr__(self, name):
    ...         return lambda *args: 0
    >>> ops = StreamOps(7, ValueError, "transfer='push'", events=(1, 2), lib=Driver())
    >>> ops.write(4096, 3)               # cuStreamWriteValue32 on stream 7: flag at address 4096 := 3
"""
from __future__ import annotations

import ctypes

GEQ = 0x0               # CU_STREAM_WAIT_VALUE_GEQ
WRITE_DEFAULT = 0x0     # CU_STREAM_WRITE_VALUE_DEFAULT
# the driver's entry points as cuda.h names them for the CUDA 12 / 13 ABI (the unsuffixed names are macros)
ENTRY = {"wait": "cuStreamWaitValue32_v2", "write": "cuStreamWriteValue32_v2", "copy": "cuMemcpyDtoDAsync_v2",
         "record": "cuEventRecord", "wait_event": "cuStreamWaitEvent"}
_ARGS = {"wait": [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint],
         "write": [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint],
         "copy": [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p],
         "record": [ctypes.c_void_p, ctypes.c_void_p], "wait_event": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]}


class StreamOps:
    """Flag waits, flag writes, copies and joins on one CUDA stream (``stream``: its raw handle). ``events``: two
    event handles on the stream's device, for :meth:`follow` and :meth:`join`. ``lib``: the driver library
    (default: :func:`tirxpy.lower.device.libcuda`); a stand-in in tests."""

    def __init__(self, stream: int, error: type, fallback: str, *, events=None, lib=None):
        from tirxpy.lower.device import libcuda

        self.error, self.fallback = error, fallback
        self._stream, self._events = stream, events
        lib = libcuda() if lib is None else lib
        if lib is None:
            raise error(f"libcuda.so.1 cannot be opened with ctypes, which the copy-engine transfer calls; pass "
                        f"{fallback} to move the data with the kernel's own warps")
        self._lib = lib
        fns = {}
        for name, entry in ENTRY.items():
            fn = getattr(lib, entry)
            if hasattr(fn, "argtypes"):          # a ctypes function (not a test's stand-in)
                fn.argtypes, fn.restype = _ARGS[name], ctypes.c_int
            fns[name] = fn
        self._wait, self._write, self._copy = fns["wait"], fns["write"], fns["copy"]
        self._record, self._wait_event = fns["record"], fns["wait_event"]

    def wait_geq(self, flag: int, value: int) -> None:
        err = self._wait(self._stream, flag, value, GEQ)
        if err:
            self._fail("cuStreamWaitValue32 on a flag", err)

    def write(self, flag: int, value: int) -> None:
        err = self._write(self._stream, flag, value, WRITE_DEFAULT)
        if err:
            self._fail("cuStreamWriteValue32 on a flag", err)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        err = self._copy(dst, src, nbytes, self._stream)
        if err:
            self._fail(f"cuMemcpyDtoDAsync of {nbytes} bytes", err)

    def follow(self, other: int) -> None:
        self._order(self._events[0], other, self._stream)

    def join(self, other: int) -> None:
        self._order(self._events[1], self._stream, other)

    def _order(self, event, first, then):
        """Stream ``then`` waits for the work queued on stream ``first`` so far (``event`` recorded on ``first``)."""
        err = self._record(event, first)
        if not err:
            err = self._wait_event(then, event, 0)
        if err:
            self._fail("an event wait between the caller's stream and the side stream", err)

    def _fail(self, what, err):
        raise self.error(f"{what} failed ({self._name(err)}); pass {self.fallback} to move the data with the kernel's "
                         "own warps")

    def _name(self, err) -> str:
        """The driver's name of error code ``err`` (``cuGetErrorName``), or ``CUresult <code>``."""
        text = ctypes.c_char_p()
        try:
            if self._lib.cuGetErrorName(ctypes.c_int(err), ctypes.byref(text)) == 0 and text.value:
                return text.value.decode()
        except (AttributeError, TypeError, ctypes.ArgumentError):
            pass
        return f"CUresult {err}"
