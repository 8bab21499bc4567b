"""The distributed GEMMs' torch API (tirxpy_kernels/dist_api.py): typed errors before any GPU work. The two-GPU
checks run under torchrun (test_dist_gpu.py)."""
import pytest
import torch

import tirxpy_kernels
from tirxpy.errors import ArgumentError
from tirxpy_kernels.dist_api import DistArgumentError, _b_operand, _tile_n


def test_without_a_process_group_the_error_says_how_to_start_one():
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with pytest.raises(DistArgumentError, match="init_process_group"):
        tirxpy_kernels.all_gather_gemm(torch.zeros(128, 64), torch.zeros(64, 64))
    with pytest.raises(ArgumentError, match="torchrun"):
        tirxpy_kernels.gemm_reduce_scatter(torch.zeros(128, 64), torch.zeros(64, 64))


def test_a_group_of_one_rank_is_refused(tmp_path):
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        with pytest.raises(DistArgumentError, match="1 ranks; the distributed GEMMs take 2"):
            tirxpy_kernels.all_gather_gemm(torch.zeros(128, 64), torch.zeros(64, 64))
        for bad in ("world", 0, object()):
            with pytest.raises(DistArgumentError, match="group must be a torch.distributed process group"):
                tirxpy_kernels.gemm_reduce_scatter(torch.zeros(128, 64), torch.zeros(64, 64), bad)
    finally:
        dist.destroy_process_group()


def test_b_orientation_and_tile_width():
    b = torch.zeros(64, 256)
    assert _b_operand(b, "b")[1] == "MN" and _b_operand(torch.zeros(256, 64).t(), "b")[1] == "K"
    with pytest.raises(DistArgumentError, match="row-major"):
        _b_operand(torch.zeros(64, 256)[:, ::2], "b")
    assert [_tile_n(n) for n in (4096, 200, 136, 64)] == [256, 192, 128, 64]
    with pytest.raises(DistArgumentError, match="narrower than one 64-column tile"):
        _tile_n(32)


def test_a_call_key_changes_with_every_input_the_kept_run_depends_on():
    from tirxpy_kernels.dist_api import _call_key

    x, y, out = torch.zeros(4, 8), torch.zeros(8, 6), torch.zeros(4, 6)
    group = object()

    def key(**kw):
        args = dict(op="ag", group=group, x=x, y=y, out=out, options=(None, "copy_engine"))
        args.update(kw)
        return _call_key(**args)

    base = key()
    assert base is not None and key() == base
    assert key(x=x.view(4, 8)) == base                        # another view of the same memory, same layout
    variants = [dict(op="rs"), dict(group=object()), dict(group=None), dict(x=x.clone()), dict(x=x[:, :4]),
                dict(x=x.t().contiguous().t()), dict(x=x.double()), dict(y=y.clone()), dict(y=y.t()),
                dict(out=None), dict(out=out.clone()), dict(out=out[:2]), dict(options=(132, "copy_engine")),
                dict(options=(None, "movers"))]
    keys = [key(**v) for v in variants]
    assert None not in keys and base not in keys and len(set(keys)) == len(keys)
    # anything not a dense tensor, or an option not None / int / str: no key (that call is checked every time)
    for bad in (dict(x=[1.0]), dict(y=x.to_sparse()), dict(out="out"), dict(options=(True, "copy_engine")),
                dict(options=(2.5, "copy_engine")), dict(options=([1], "copy_engine"))):
        assert key(**bad) is None, bad


def test_a_kept_run_is_taken_only_while_its_group_is_the_live_one(tmp_path):
    import torch.distributed as dist

    from tirxpy_kernels.dist_api import _CALLS, _repeat

    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    key = ("test-only key",)
    run = object()
    try:
        dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
        world = dist.group.WORLD
        _CALLS.put(key, (world, 0, run))
        assert _repeat(key, None) is run and _repeat(key, world) is run
        assert _repeat(("another key",), None) is None
        _CALLS.put(key, (object(), 0, run))             # kept for another default group (since destroyed)
        assert _repeat(key, None) is None
        _CALLS.put(key, (world, 0, run))
    finally:
        dist.destroy_process_group()
    assert _repeat(key, None) is None and _repeat(key, world) is None     # no process group: checked again
    del _CALLS._entries[key]


class _NoPointer(torch.Tensor):
    """A tensor subclass claiming a CUDA device whose data pointer cannot be read (as a functorch batched tensor's)."""

    @staticmethod
    def __new__(cls, shape):
        return torch.Tensor._make_wrapper_subclass(cls, shape, dtype=torch.bfloat16, device="cuda")

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(f"{func}")

    def data_ptr(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")


def test_a_tensor_without_a_data_pointer_gets_no_key_and_a_typed_error():
    from tirxpy_kernels.dist_api import _call_key, _tensor

    t = _NoPointer((256, 128))
    assert _call_key("ag", None, t, torch.zeros(128, 64), None, (None, "copy_engine")) is None
    with pytest.raises(DistArgumentError, match="a_shard has no data pointer .* pass a plain torch tensor"):
        _tensor(t, "a_shard", "(M / world, K)")


def test_a_numpy_lag_is_an_int(monkeypatch):
    import numpy as np

    from tirxpy_kernels import dist_api

    monkeypatch.setattr(dist_api, "_group", lambda group: (object(), 0, 2))       # a stand-in two-rank group
    monkeypatch.setattr(dist_api, "_tensor", lambda *a, **k: None)                 # CPU tensors past the CUDA checks
    monkeypatch.setattr(dist_api, "_current_device", lambda *a: None)
    a, b = torch.zeros(256, 64, dtype=torch.bfloat16), torch.zeros(64, 128, dtype=torch.bfloat16)
    # (np.int64 was refused as 'must be an int'): its value is judged, here against the transfer it tunes
    with pytest.raises(DistArgumentError, match="lag = 3 tunes transfer='push' only"):
        tirxpy_kernels.gemm_reduce_scatter(a, b, lag=np.int64(3))


def test_nested_and_sparse_tensors_are_named_before_their_shapes_are_read():
    from tirxpy_kernels.dist_api import _tensor

    nested = torch.nested.nested_tensor([torch.zeros(3, 8), torch.zeros(5, 8)], dtype=torch.bfloat16)
    with pytest.raises(DistArgumentError, match="a_shard is a nested tensor"):
        _tensor(nested, "a_shard", "(M / world, K)")
    with pytest.raises(DistArgumentError, match="b is a sparse tensor"):
        _tensor(torch.zeros(8, 8, dtype=torch.bfloat16).to_sparse(), "b", "(K, N)")


def test_a_rank_outside_the_group_is_told_so(tmp_path):
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:        # what dist.new_group returns on a rank it leaves out
        with pytest.raises(DistArgumentError, match="this rank is not one of its members"):
            tirxpy_kernels.all_gather_gemm(torch.zeros(128, 64), torch.zeros(64, 64), dist.GroupMember.NON_GROUP_MEMBER)
    finally:
        dist.destroy_process_group()
