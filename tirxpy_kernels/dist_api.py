"""torch API of the distributed GEMMs: ``all_gather_gemm(a_shard, b, group)`` and
``gemm_reduce_scatter(a, b_shard, group)`` on the ranks of a ``torch.distributed`` process group (NCCL, launched
with ``torchrun``), with their peer buffers in torch's symmetric memory (``torch.distributed._symmetric_memory``:
``empty`` + ``rendezvous``; a peer's buffer is reached through ``get_buffer``).

Every rank of the group calls the function with its own shard, in the same order (like a collective). The first
call for a shape allocates the symmetric buffers (``empty`` + ``rendezvous``, collective) and zeroes their flags;
later calls reuse them: a call number (``epoch``) makes every flag a counter that only grows, so nothing is reset
between calls. A call like an earlier checked one (the same group, tensors at the same addresses with the same
shapes, strides, dtypes and devices, the same options) skips the checks and the planning: what that call fixed
(the kernel, the buffers, the addresses of the transfer: a run of :mod:`tirxpy_kernels.dist_runs`) is kept per call
key (:func:`_call_key`). No multicast object is created and no ``multimem`` instruction is emitted (run with
``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` as well, so torch creates none either).

Shapes: ``a_shard (M / world, K)`` and ``b (K, N)`` (row-major, or the transpose of a row-major ``(N, K)``
weight) give ``A_full @ b``, ``(M, N)``; ``a (M, K / world)`` and ``b_shard (K / world, N)`` give this rank's
rows ``(M / world, N)`` of ``sum_r a_r @ b_r``. bf16 in and out, ``world = 2``. An input may start at any address
(one off a 16-byte boundary, a view at an odd offset, is read from an aligned copy, on every call); an ``out`` off
one is refused (:class:`DistArgumentError` naming it and the fix), as the kernel writes it in place. The kernels are
:mod:`tirxpy_kernels.dist_ag_gemm` and :mod:`tirxpy_kernels.dist_rs_gemm`; docs/distributed.md is the design.
"""
from __future__ import annotations

import functools

from .checks import address
from .dist_runs import CHUNKS, RS_CHUNKS, DistArgumentError, ag_copy_engine, ag_movers, rs_copy_engine, rs_push
from .errors import KernelConfigError, is_int, shown
from .launch_cache import LaunchCache, compiled, tensor_key

ARCH = "sm_90a"


def _group(group):
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise DistArgumentError("the distributed GEMMs run on a torch.distributed process group: call "
                                "torch.distributed.init_process_group('nccl') first (launch with torchrun)")
    if group is dist.GroupMember.NON_GROUP_MEMBER:
        raise DistArgumentError("group is the value dist.new_group(...) returns on a rank outside the group: this "
                                "rank is not one of its members; call the distributed GEMMs on the group's ranks only")
    if group is not None and not isinstance(group, dist.ProcessGroup):
        raise DistArgumentError(f"group must be a torch.distributed process group (dist.new_group(...)) or None for "
                                f"the default one, got {type(group).__name__}")
    group = dist.group.WORLD if group is None else group
    world, me = dist.get_world_size(group), dist.get_rank(group)
    if world != 2:
        raise DistArgumentError(f"the process group has {world} ranks; the distributed GEMMs take 2 (one NVLink peer) "
                                "for now: docs/distributed.md says how they extend")
    return group, me, world


def _not_capturing(what):
    """The kernels' flags count calls (``epoch``), which a captured CUDA graph would replay unchanged: refuse."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise DistArgumentError(f"{what} cannot be captured in a CUDA graph: its flags count calls, and a replayed "
                                "call would reuse the captured call number (so it would not wait for new rows); "
                                "call it eagerly, outside the capture")


def _tensor(t, name, shape_text, like=None, like_name=""):
    """``t`` is a 2-D bf16 CUDA tensor with a data pointer, on ``like``'s device when given. ``out``, which the
    kernel writes in place (TMA stores 16-byte aligned rows), must start on a 16-byte boundary; an input may start
    anywhere: the call copies one off it (:func:`_aligned`)."""
    import torch

    from .checks import aligned, dense_tensor, misalignment

    if not isinstance(t, torch.Tensor):
        raise DistArgumentError(f"{name} must be a torch tensor {shape_text}, got {type(t).__name__}")
    dense_tensor("the distributed GEMM", name, t, t.dim(), shape_text, DistArgumentError)     # nested / sparse
    if t.dtype != torch.bfloat16 or t.device.type != "cuda" or t.dim() != 2:
        raise DistArgumentError(f"{name} must be a 2-D bfloat16 CUDA tensor {shape_text}, got {tuple(t.shape)} "
                                f"{t.dtype} on {t.device}")
    if like is not None and t.device != like.device:
        raise DistArgumentError(f"{name} is on {t.device} and {like_name} on {like.device}: pass both on this rank's "
                                "GPU")
    if name == "out":
        aligned("the distributed GEMM", name, t, DistArgumentError, 16, "a freshly allocated out (or out=None)")
    else:
        misalignment("the distributed GEMM", name, t, DistArgumentError)       # names a tensor without a pointer


def _aligned(x, y, names):
    """The two inputs as the kernel reads them: each itself where its data starts on a 16-byte boundary, else an
    aligned copy of its values with the same strides (:func:`~tirxpy_kernels.checks.aligned_input`), on every call
    (a kept run too: its key holds the addresses, not a copy).

        >>> import torch
        >>> x = torch.zeros(40, dtype=torch.bfloat16)
        >>> a, b = _aligned(x[8:40].view(4, 8), x[1:33].view(8, 4).t(), ("a", "b"))
        >>> a._base is x, b.data_ptr() % 16, b.stride()
        (True, 0, (1, 4))
    """
    from .checks import aligned_input

    return (aligned_input("the distributed GEMM", names[0], x, DistArgumentError),
            aligned_input("the distributed GEMM", names[1], y, DistArgumentError))


def _current_device(t, name):
    """``t`` is on the current CUDA device, where the symmetric buffers are made and the kernel runs."""
    import torch

    if not torch.cuda.is_available():
        raise DistArgumentError(f"{name} is on {t.device}, but torch sees no CUDA device in this process; run on the "
                                "GPU machine, one process per GPU (torchrun)")
    if t.device.index != torch.cuda.current_device():
        raise DistArgumentError(f"{name} is on {t.device} but the current device is "
                                f"cuda:{torch.cuda.current_device()}, where this rank's buffers and kernel live: call "
                                f"torch.cuda.set_device({t.device.index}) first (torchrun: the LOCAL_RANK device)")


def _b_operand(b, name):
    """``(tensor the kernel takes, b_major)``: ``b (K, N)`` row-major as is, or ``b.t()`` of a row-major ``(N, K)``."""
    if b.is_contiguous():
        return b, "MN"
    if b.t().is_contiguous():
        return b.t(), "K"
    raise DistArgumentError(f"{name} {tuple(b.shape)} must be row-major or the transpose of a row-major tensor; "
                            f"pass {name}.contiguous()")


def _tile_n(N):
    for bn in (256, 192, 128, 64):
        if bn <= N:
            return bn
    raise DistArgumentError(f"N = {N} is narrower than one 64-column tile; pad b's columns to 64")


def _sizes(M, N, K, what):
    if M < 128 or K < 64:
        raise DistArgumentError(f"{what}: M = {M} rows and K = {K} must be at least 128 and 64 (one tile); pad them")
    if K % 8 or N % 8:
        raise DistArgumentError(f"{what}: K = {K} and N = {N} must be multiples of 8 (16-byte rows, which TMA needs)")


def _sms(sms, device, what):
    """The persistent kernel's CTA count: ``sms``, or every SM of ``device`` when None."""
    import torch

    count = torch.cuda.get_device_properties(device).multi_processor_count
    if sms is None:
        return count
    if not is_int(sms) or not 1 <= sms <= count:
        raise DistArgumentError(f"{what}: sms = {shown(sms)} must be None or an int in [1, {count}] (the persistent "
                                f"kernel's CTAs; this GPU has {count} SMs)")
    return int(sms)


def _check_out(out, shape, like, name, inputs=()):
    """``out`` (when given) is a row-major bf16 tensor of ``shape`` on ``like``'s device that shares no memory with
    the named ``inputs``."""
    from .checks import overlaps

    if out is None:
        return
    _tensor(out, "out", str(tuple(shape)))
    if tuple(out.shape) != tuple(shape) or not out.is_contiguous() or out.device != like.device:
        raise DistArgumentError(f"{name}: out must be a row-major {tuple(shape)} tensor on {like.device}, got "
                                f"{tuple(out.shape)} on {out.device}")
    for what, t in inputs:
        if overlaps(out, t):
            raise DistArgumentError(f"{name}: out shares memory with {what}, which is read while out is written; "
                                    "pass a separate out tensor (or out=None)")


_CALLS = LaunchCache("distributed GEMM calls", max_entries=64)
_KEYED = (type(None), int, str)


def _call_key(op, group, x, y, out, options):
    """The key of a call: the op, the group object, each tensor's shape, strides, dtype, device and address,
    ``out``'s too (or None), the options; None (a call that is always checked) when a tensor argument is not a
    dense tensor or an option is not None, an int or a str.

        >>> import torch
        >>> x, y = torch.zeros(4, 8), torch.zeros(8, 2)
        >>> _call_key("ag", None, x, y, None, (None, "copy_engine")) == _call_key("ag", None, x, y, None,
        ...                                                                    (None, "copy_engine"))
        True
        >>> _call_key("ag", None, x.clone(), y, None, (None, "copy_engine")) == _call_key("ag", None, x, y, None,
        ...                                                                            (None, "copy_engine"))
        False
        >>> _call_key("ag", None, x, y, None, (True, "copy_engine")), _call_key("ag", None, x, [1], None, ())
        (None, None)
    """
    kx, ky = tensor_key(x), tensor_key(y)
    ko = None if out is None else tensor_key(out)
    if kx is None or ky is None or (out is not None and ko is None):
        return None
    if any(type(v) not in _KEYED for v in options):
        return None
    px, py, po = address(x), address(y), None if out is None else address(out)
    if px is None or py is None or (out is not None and po is None):
        return None
    return (op, id(group), options, kx, px, ky, py, None if out is None else (ko, po))


def _repeat(key, group):
    """The run of an earlier checked call with this key while a process group is initialized, its group is still
    the one meant (``group``, or the default group when None), the current device is its device and no CUDA graph
    is being captured; else None (the call is checked, and an error names what changed)."""
    got = _CALLS.get(key)
    if got is None:
        return None
    import torch
    import torch.distributed as dist

    g, index, run = got
    if not dist.is_initialized() or (group is None and dist.group.WORLD is not g):
        return None
    if torch.cuda.is_available() and (torch.cuda.current_device() != index or torch.cuda.is_current_stream_capturing()):
        return None
    return run


def all_gather_gemm(a_shard, b, group=None, *, out=None, sms=None, transfer="copy_engine"):
    """``A_full @ b`` on every rank, where ``A_full`` stacks the ranks' ``a_shard`` in rank order: one persistent
    GEMM kernel per rank runs over the rows already in while the rest arrive (:mod:`tirxpy_kernels.dist_ag_gemm`).
    ``transfer``: ``"copy_engine"`` (default) pushes this rank's shard into each peer's buffer with the copy
    engines, chunk by chunk, each chunk counted on the peer's flag by a stream write (no SM time);
    ``"movers"`` pushes it with warps of the kernel itself. ``sms``: the kernel's CTAs (default: every SM).
    Returns ``out`` (a new ``(M, N)`` bf16 tensor when None)."""
    key = _call_key("ag", group, a_shard, b, out, (sms, transfer))
    run = _repeat(key, group)
    if run is None:
        g, run = _ag_checked(a_shard, b, group, out, sms, transfer)
        _CALLS.put(key, (g, a_shard.device.index, run))
    return run(*_aligned(a_shard, b, ("a_shard", "b")), out)


def _ag_checked(a_shard, b, group, out, sms, transfer):
    """``(group, run)`` after every check of a call: ``run(a_shard, b, out)`` makes the call (and every later one
    with the same key)."""
    from .dist_ag_gemm import TRANSFERS

    group, me, world = _group(group)
    _not_capturing("all_gather_gemm")
    _tensor(a_shard, "a_shard", "(M / world, K)")
    _current_device(a_shard, "a_shard")
    _tensor(b, "b", "(K, N)", a_shard, "a_shard")
    if not isinstance(transfer, str) or transfer not in TRANSFERS:
        raise DistArgumentError(f"transfer = {shown(transfer)} must be one of {TRANSFERS}")
    if not a_shard.is_contiguous():
        raise DistArgumentError(f"a_shard {tuple(a_shard.shape)} must be row-major; pass a_shard.contiguous()")
    ms, K = a_shard.shape
    if b.shape[0] != K:
        raise DistArgumentError(f"a_shard is {tuple(a_shard.shape)} and b is {tuple(b.shape)}: b must have K = {K} "
                                "rows")
    M, N = ms * world, b.shape[1]
    _sizes(M, N, K, "all_gather_gemm")
    _, b_major = _b_operand(b, "b")
    sms = _sms(sms, a_shard.device, "all_gather_gemm")
    _check_out(out, (M, N), a_shard, "all_gather_gemm", (("a_shard", a_shard), ("b", b)))
    try:
        ck = compiled(_ag_kernel(M, N, K, me, world, b_major, sms, transfer, CHUNKS), ARCH)
    except KernelConfigError as e:
        raise DistArgumentError(f"all_gather_gemm: {e}") from None
    build = ag_copy_engine if transfer == "copy_engine" else ag_movers
    return group, build(ck, a_shard.device, group, me, world, M, N, K, b_major == "K")


@functools.lru_cache(maxsize=64)
def _ag_kernel(M, N, K, me, world, b_major, sms, transfer, chunks):
    """The all-gather GEMM kernel of this problem: ``BN`` from :func:`_tile_n`, and with a K-major ``b`` the
    standalone GEMM's :func:`~tirxpy_kernels.gemm_plan.balanced_split` (its search runs once per shape)."""
    from .dist_ag_gemm import ag_gemm
    from .gemm_plan import balanced_split

    BN = _tile_n(N)
    split = balanced_split(M, N, K, BN, sms) if b_major == "K" else None
    return ag_gemm(M, N, K, me=me, world=world, BN=BN, b_major=b_major, sms=sms, transfer=transfer, CHUNKS=chunks,
                   SPLIT=split)


def gemm_reduce_scatter(a, b_shard, group=None, *, out=None, sms=None, lag=None, transfer="copy_engine"):
    """This rank's rows of ``sum_r a_r @ b_shard_r`` (``a`` holds this rank's ``K`` shard of the columns): one
    persistent kernel per rank computes tiles of the peer's rows and tiles of its own
    (:mod:`tirxpy_kernels.dist_rs_gemm`). ``transfer``: ``"copy_engine"`` (default) keeps the peer's partials
    in a local buffer, the copy engines pull them into the peer's ``out`` chunk by chunk, and each own tile is
    reduce-added onto them (the sum of two bf16-rounded partials, as NCCL's bf16 reduce-scatter gives);
    ``"push"`` stores the partials into the peer's buffer over NVLink and adds the peer's in float32 registers,
    its walk starting with ``lag`` tile rows of the peer's before interleaving the two (default
    :func:`~tirxpy_kernels.dist_rs_walk.rs_lag`). ``sms``: the kernel's CTAs (default: every SM). Returns ``out``
    (a new ``(M / world, N)`` bf16 tensor when None)."""
    key = _call_key("rs", group, a, b_shard, out, (sms, lag, transfer))
    run = _repeat(key, group)
    if run is None:
        g, run = _rs_checked(a, b_shard, group, out, sms, lag, transfer)
        _CALLS.put(key, (g, a.device.index, run))
    return run(*_aligned(a, b_shard, ("a", "b_shard")), out)


def _rs_checked(a, b_shard, group, out, sms, lag, transfer):
    """``(group, run)`` after every check of a call (as :func:`_ag_checked`)."""
    from .dist_rs_gemm import TRANSFERS

    group, me, world = _group(group)
    _not_capturing("gemm_reduce_scatter")
    _tensor(a, "a", "(M, K / world)")
    _current_device(a, "a")
    _tensor(b_shard, "b_shard", "(K / world, N)", a, "a")
    if not isinstance(transfer, str) or transfer not in TRANSFERS:
        raise DistArgumentError(f"transfer = {shown(transfer)} must be one of {TRANSFERS}")
    if lag is not None and not is_int(lag):
        raise DistArgumentError(f"lag = {shown(lag)} must be an int (tile rows of the peer's shard first) or None")
    lag = None if lag is None else int(lag)
    if lag is not None and transfer != "push":
        raise DistArgumentError(f"lag = {shown(lag)} tunes transfer='push' only (the copy-engine walk takes every peer "
                                "tile first); pass transfer='push' with it, or drop lag")
    if not a.is_contiguous():
        raise DistArgumentError(f"a {tuple(a.shape)} must be row-major; pass a.contiguous()")
    M, K = a.shape
    if b_shard.shape[0] != K:
        raise DistArgumentError(f"a is {tuple(a.shape)} and b_shard is {tuple(b_shard.shape)}: b_shard must have "
                                f"{K} rows")
    N = b_shard.shape[1]
    if M % world:
        raise DistArgumentError(f"M = {M} rows must split evenly over {world} ranks")
    _sizes(M, N, K, "gemm_reduce_scatter")
    _, b_major = _b_operand(b_shard, "b_shard")
    BN = _tile_n(N)
    sms = _sms(sms, a.device, "gemm_reduce_scatter")
    _check_out(out, (M // world, N), a, "gemm_reduce_scatter", (("a", a), ("b_shard", b_shard)))
    try:
        prim, split = _rs_kernel(M, N, K, me, world, BN, b_major, sms, lag, transfer)
        ck = compiled(prim, ARCH)
    except KernelConfigError as e:
        raise DistArgumentError(f"gemm_reduce_scatter: {e}") from None
    if transfer == "copy_engine":
        return group, rs_copy_engine(ck, a.device, group, me, world, M, N, BN, split, b_major == "K")
    return group, rs_push(ck, a.device, group, me, world, M, N, BN, b_major == "K")


@functools.lru_cache(maxsize=64)
def _rs_kernel(M, N, K, me, world, BN, b_major, sms, lag, transfer):
    """``(kernel, split)``: the reduce-scatter kernel of this problem (:func:`~tirxpy_kernels.dist_rs_gemm.rs_gemm`)
    and, for the copy-engine walk with a K-major ``b``, its :func:`~tirxpy_kernels.dist_rs_walk.rs_split` (else
    None); built once per shape."""
    from .dist_rs_gemm import rs_gemm
    from .dist_rs_walk import rs_split

    split = rs_split(M, N, K, BN, world, sms) if transfer == "copy_engine" and b_major == "K" else None
    return rs_gemm(M, N, K, me=me, world=world, BN=BN, b_major=b_major, sms=sms, LAG=lag, transfer=transfer,
                   CHUNKS=RS_CHUNKS, SPLIT=split), split


