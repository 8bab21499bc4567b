"""tirxpy_kernels.bench: the command line's checks (the timing itself runs on a GPU, not in tests): every bad argument
exits 2 with a message on stderr and no traceback, before any GPU work; each benchmark has its own help with its
shape syntax and defaults; --sim prints its seed and fails past its stated tolerance."""
import subprocess
import sys

import pytest

from tirxpy_kernels.bench import BenchArgumentError, main, parse_shapes, parse_tunings


def test_parse_shapes_reads_lists_of_int_tuples():
    assert parse_shapes("4096x4096x4096, 8x16x32", 3, "1x1x1") == [(4096, 4096, 4096), (8, 16, 32)]
    assert parse_shapes("1024x64", 2, "4096x128") == [(1024, 64)]


@pytest.mark.parametrize("text,dims", [("1024x64c", 2), ("4096x4096", 3), ("4096x0", 2), ("", 2), ("4096x-1", 2),
                                       ("64x64,", 2), ("٤x64", 2)])
def test_parse_shapes_names_the_bad_item(text, dims):
    with pytest.raises(BenchArgumentError) as e:
        parse_shapes(text, dims, "EXAMPLE")
    msg = str(e.value)
    assert msg.startswith("--shapes: ") and "EXAMPLE" in msg and f"is not {dims} positive integers" in msg


def test_parse_tunings_names_the_bad_item():
    assert parse_tunings("BN=128, STAGES=3;", ("BN", "STAGES")) == [{"BN": 128, "STAGES": 3}, {}]
    for text, msg in (("BN", "'BN' is not KEY=VALUE"), ("=3", "'=3' is not KEY=VALUE"),
                      ("BM=128", "unknown option 'BM'; the kernel takes BN, STAGES"),
                      ("BN=128,BN=64", "BN is given twice")):
        with pytest.raises(BenchArgumentError, match=msg):
            parse_tunings(text, ("BN", "STAGES"))


@pytest.mark.parametrize("argv,msg", [
    (["gemm", "--shapes", "4096x4096"], "--shapes: '4096x4096' is not 3 positive integers"),
    (["attention", "--shapes", "1024x64c"], "--shapes: '1024x64c' is not 2 positive integers"),
    (["gemm", "--tune", "BN"], "--tune: 'BN' is not KEY=VALUE"),
    (["gemm", "--tune", "BN=abc"], "gemm: BN must be an int, got 'abc' (str)"),
    (["gemm", "--tune", "BN=100"], "gemm: BN = 100 must be a multiple of 16 in [64, 256]"),
    (["gemm", "--shapes", "4096x4096x4096", "--tune", "BN=256,PINGPONG=1"], "PINGPONG keeps a whole (128, 256)"),
    (["attention", "--tune", "NC=7"], "attention: NC = 7 consumer warpgroups"),
    (["attention", "--shapes", "1024x96"], "attention: head dim 96 is not supported"),
    (["gemm", "--sim", "--tune", "BN=128"], "--sim runs one small gemm kernel through the CPU simulator; --tune does "
                                            "not apply to it"),
    (["attention", "--sim", "--reps", "3", "--jobs", "0"], "--reps, --jobs do not apply"),
    (["gemm", "--sim", "--shapes", "256x256x128,512x512x512"], "--sim takes one shape"),
    (["gemm", "--sim", "--shapes", "100x100x100"], "--sim --shapes 100x100x100: gemm_sm90: the rows of A"),
    (["attention", "--sim", "--shapes", "150x96"], "--sim --shapes 150x96: attention_sm90: head dim 96"),
    (["gemm", "--reps", "0"], "argument --reps: '0' is not a positive integer"),
    (["gemm", "--jobs", "-1"], "argument --jobs: '-1' is not a non-negative integer"),
    (["rmsnorm", "--sim", "--seed", "99999999999999999999"], "argument --seed: '99999999999999999999' is not an "
                                                             "integer in [0, 4294967295]"),
    # --sim shapes past each simulator run's bound are refused before anything is allocated (they allocated up to
    # terabytes, or ran past the simulator's step budget, each ending in a traceback)
    (["gemm", "--sim", "--shapes", "100000x100000x64"],
     "--sim --shapes 100000x100000x64: the simulator runs small kernels on the CPU, sizes whose product is at most "
     "1073741824"),
    (["attention", "--sim", "--shapes", "4096x64"], "product is at most 65536 (this one's is 262144)"),
    (["attention-bwd", "--sim", "--shapes", "1000000x64"], "product is at most 65536"),
    (["rmsnorm", "--sim", "--shapes", "100000000x4096"], "product is at most 1048576"),
    (["quantize", "--sim", "--shapes", "1000000x100000"], "product is at most 1048576"),
    (["quantize", "--sim", "--shapes", "1x1048576"], "granularity 'token' holds a whole row in one CTA"),
    (["fp8", "--sim", "--shapes", "64x64x64"], "--sim runs one fixed block-scaled kernel (200x264x272); --shapes does "
                                               "not apply"),
    (["dist", "--sim", "--seed", "-1"], "argument --seed: '-1' is not an integer in [0, 4294967295]"),
    (["dist", "--sim", "--seed", "99999999999999999999"], "argument --seed: '99999999999999999999' is not an "
                                                          "integer in [0, 4294967295]"),
    # gemm --sim bounds the simulator's work up front: a long thin problem ran into its step budget after a minute
    (["gemm", "--sim", "--shapes", "128x65536x64"], "--sim --shapes 128x65536x64: the simulated kernel would take "
                                                    "about 824320 steps (512 output tiles of 256 x 128"),
    (["gemm", "--sim", "--shapes", "65536x128x64"], "past the 250000 a --sim run takes"),
    (["gemm", "--sim", "--shapes", "128x128x65536"], "about 421040 steps (1 output tile of 256 x 128"),
    # options a --sim run does not take are refused by name, not ignored
    (["gemm", "--sim", "--epilogue", "bias"], "--sim runs one small gemm kernel through the CPU simulator; "
                                              "--epilogue does not apply to it (leave it out)"),
    (["gemm", "--sim", "--passes", "2"], "--passes does not apply"),
    (["fp8", "--sim", "--scalings", "tensor", "--host"], "--sim runs one fixed block-scaled kernel (200x264x272); "
                                                         "--scalings, --host do not apply to it"),
    (["fp8", "--scalings", ","], "--scalings: ',' names no scaling; pass some of tensor, row, block"),
    (["dist", "--sim", "--shapes", "ag:64x64x64"], "--sim runs both kernels at fixed small shapes (ag:200x136x104, "
                                                   "rs:200x136x208) on two simulated ranks; --shapes does not apply"),
    (["dist", "--sim", "--reps", "5", "--inner", "3", "--no-tirxpy-gemm"], "--reps, --inner, --no-tirxpy-gemm do not "
                                                                          "apply"),
    (["train", "--sim", "--batch", "1", "--seq", "512", "--dim", "256", "--mlp", "512", "--tokens", "9000"],
     "--sim runs the VARLEN attention kernel on three fixed packed sequences in the CPU simulator; --batch, --seq, "
     "--dim, --mlp, --tokens do not apply to it (leave them out)"),
    (["train", "--sim", "--reps", "3"], "--reps does not apply"),
    (["train", "--sim", "--seed", "99999999999999999999"], "argument --seed: '99999999999999999999' is not an "
                                                           "integer in [0, 4294967295]"),
    # --sim shapes the kernel or the simulator does not take are refused before the run, not by its traceback
    (["attention-bwd", "--sim", "--shapes", "150x96"], "--sim --shapes 150x96: attention_bwd_sm90: head dim 96"),
    (["attention-bwd", "--sim", "--shapes", "1x64"], "a sequence of 1 has dQ = 0 exactly"),
    (["quantize", "--sim", "--shapes", "8192x128"], "--sim --shapes 8192x128 --granularity token: the kernel's grid "
                                                    "has 8192 CTAs (8192 warps in all), past the 4096 CTAs"),
    (["rmsnorm", "--sim", "--shapes", "1x4064"], "--shapes 1x4064: rmsnorm_silu: the row width 4064 = 32 x 127"),
    (["conv"], "invalid choice: 'conv'"),
    ([], "the following arguments are required: name"),
])
def test_bad_arguments_exit_2_before_any_gpu_work(argv, msg, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err


def test_without_a_gpu_a_timing_run_says_so(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["gemm", "--tune", ";BN=192,PINGPONG=1"]) == 2
    err = capsys.readouterr().err
    assert "gemm times kernels on a CUDA GPU and this machine has none" in err and "--sim" in err


def test_sim_applies_its_one_shape(monkeypatch):
    """--sim runs the simulator's kernel at the --shapes item given (the run itself is stubbed here)."""
    import tirxpy_kernels.bench as bench
    import tirxpy_kernels.bench_attention as ba

    seen = []
    monkeypatch.setattr(bench, "sim_gemm", lambda args: seen.append(("gemm", args.shapes)) or 0)
    monkeypatch.setattr(ba, "sim_attention", lambda args: seen.append(("attention", args.shapes)) or 0)
    assert main(["gemm", "--sim", "--shapes", "256x256x128"]) == 0
    assert main(["attention", "--sim"]) == 0
    assert seen == [("gemm", "256x256x128"), ("attention", "")]


def test_sim_prints_its_seed_and_tolerance(capsys):
    assert main(["rmsnorm", "--sim", "--seed", "17"]) == 0
    out = capsys.readouterr().out
    assert "tirxpy.sim rmsnorm_silu 16x256" in out and "seed 17" in out and "(tolerance 1e-02)" in out


def test_sim_past_its_tolerance_fails_with_the_seed(capsys, monkeypatch):
    import tirxpy_kernels.bench_rmsnorm as br

    good = br.reference
    monkeypatch.setattr(br, "reference", lambda x, w: good(x, w) * 1.05)     # 5% off: past 1e-2
    assert main(["rmsnorm", "--sim", "--seed", "5", "--shapes", "8x64"]) == 1
    err = capsys.readouterr().err
    assert "FAILED: relative error" in err and "past the tolerance 1e-02; rerun with --seed 5" in err


def test_a_seed_drawn_from_the_clock_is_printed(capsys):
    assert main(["rmsnorm", "--sim", "--shapes", "8x64"]) == 0
    out = capsys.readouterr().out
    assert ", seed " in out and out.split(", seed ")[1].split(",")[0].isdigit()


@pytest.mark.parametrize("name,syntax,default", [
    ("gemm", "MxNxK", "4096x2112x7168"), ("attention", "SxD", "1024/4096/8192/16384"),
    ("rmsnorm", "ROWSxD", "16384x4096")])
def test_each_benchmark_has_its_own_help_with_shapes_and_defaults(name, syntax, default, capsys):
    assert main([name, "-h"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"usage: python -m tirxpy_kernels.bench {name}" in out and syntax in out and default in out
    assert "(default 50)" in out or "(default 30)" in out or "(default 25)" in out
    assert "exits 1 when the relative error is not below" in out


@pytest.mark.parametrize("argv,msg", [
    (["rmsnorm", "--shapes", "16x100"], "the row width 100 must be a positive multiple of 32"),
    (["rmsnorm", "--tune", "elems_per_thread=0"], "elems_per_thread must be a positive int, got 0"),
    (["rmsnorm", "--tune", "BN=128"], "unknown option 'BN'; the kernel takes elems_per_thread"),
    (["gemm", "--passes", "0"], "argument --passes: '0' is not a positive integer"),
    (["gemm", "--epilogue", "gelu"], "invalid choice: 'gelu'"),
    # a token count the packing loop would take minutes over, and no GPU holds
    (["train", "--tokens", str(10 ** 12)], "--tokens = 1000000000000 is past 16777216"),
    (["train", "--batch", "4096", "--seq", "8192"], "--batch x --seq = 33554432 is past 16777216"),
])
def test_more_bad_arguments(argv, msg, capsys):
    assert main(argv) == 2
    assert msg in capsys.readouterr().err


def test_the_harness_modules_import_in_any_order():
    """No import cycle: each benchmark module imports on its own, below tirxpy_kernels.bench."""
    code = ("import tirxpy_kernels.bench_attention, tirxpy_kernels.bench_rmsnorm, tirxpy_kernels.bench_tools, tirxpy_kernels.bench; "
            "import inspect; assert '__import__' not in inspect.getsource(tirxpy_kernels.bench)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_module_entry_point_exits_2_without_a_traceback():
    r = subprocess.run([sys.executable, "-m", "tirxpy_kernels", "gemm", "--tune", "BN=7"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "gemm: BN = 7 must be a multiple of 16" in r.stderr and "Traceback" not in r.stderr


def test_queue_sleep_queues_cycles_for_the_asked_time_at_2_ghz(monkeypatch):
    """bench_tools.queue_sleep: a ``before`` for median_ms that queues one sleep kernel of ms * 2e6 cycles (at least
    ``ms`` milliseconds at any clock up to 2 GHz) each time it is called, and nothing when it is made."""
    import torch

    from tirxpy_kernels.bench_tools import queue_sleep

    calls = []
    monkeypatch.setattr(torch.cuda, "_sleep", calls.append)
    before = queue_sleep(12.5)
    assert calls == []
    before()
    before()
    assert calls == [25_000_000, 25_000_000]


def test_sim_gemm_steps_bound_the_simulators_work():
    """bench.sim_gemm_steps is an upper bound of the --sim kernel's simulator steps (a run with that budget ends
    cleanly) along each axis, and the largest cube --sim takes is within SIM_STEPS (and the simulator's budget)."""
    import torch

    from tirxpy.sim import run
    from tirxpy.sim.run import DEFAULT_STEPS
    from tirxpy_kernels.bench import SIM_GEMM, SIM_STEPS, sim_gemm_steps
    from tirxpy_kernels.gemm_sm90 import gemm_sm90

    assert sim_gemm_steps(1024, 1024, 1024) <= SIM_STEPS < DEFAULT_STEPS
    for M, N, K in [(128, 128, 64), (1024, 128, 64), (128, 512, 64), (128, 128, 1024)]:
        a, w = torch.randn(M, K).bfloat16(), torch.randn(N, K).bfloat16()
        res = run(gemm_sm90(M, N, K, **SIM_GEMM), a, w, torch.zeros(1, 1), torch.zeros(M, N),
                  max_steps=sim_gemm_steps(M, N, K), check=False)
        assert not res.problems, (M, N, K, res.problems)


def test_sim_gemm_takes_shapes_up_to_its_bound(monkeypatch):
    import tirxpy_kernels.bench as bench

    seen = []
    monkeypatch.setattr(bench, "sim_gemm", lambda args: seen.append(args.shapes) or 0)
    assert main(["gemm", "--sim", "--shapes", "1024x1024x1024"]) == 0 and seen == ["1024x1024x1024"]


def test_attention_sim_pads_a_sequence_shorter_than_a_tile(capsys):
    """--sim --shapes 1x64: the sequence is zero-padded to one tile, as tirxpy_kernels.attention pads it (the
    kernel refused the unpadded tensors with a traceback)."""
    assert main(["attention", "--sim", "--shapes", "1x64", "--seed", "1"]) == 0
    assert "S=1 D=64 causal" in capsys.readouterr().out


def test_train_sim_reads_the_varlen_output_and_fails_on_nan(capsys, monkeypatch):
    """bench train --sim compares the packed rows the kernel wrote (a real, nonzero relative error), and a NaN error
    fails (max() kept the 0 it started from, so an all-NaN read passed with relerr 0)."""
    import tirxpy_kernels.bench_train as bt

    assert main(["train", "--sim", "--seed", "3"]) == 0
    err = float(capsys.readouterr().out.split("relerr vs float64 ")[1].split()[0])
    assert 0 < err < bt.SIM_TOLERANCE
    good = bt.relative_error
    calls = []
    monkeypatch.setattr(bt, "relative_error", lambda x, ref: (calls.append(1), good(x, ref) if len(calls) < 2
                                                              else float("nan"))[1])
    assert main(["train", "--sim", "--seed", "3"]) == 1
    assert "relerr vs float64 nan" in capsys.readouterr().out
