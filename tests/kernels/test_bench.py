"""kernels.bench: the command line's shape lists (the timing itself runs on a GPU, not in tests)."""
import pytest

from kernels.bench import main, parse_shapes


def test_parse_shapes_reads_lists_of_int_tuples():
    assert parse_shapes("4096x4096x4096, 8x16x32", 3, "1x1x1") == [(4096, 4096, 4096), (8, 16, 32)]
    assert parse_shapes("1024x64", 2, "4096x128") == [(1024, 64)]


@pytest.mark.parametrize("text,dims", [("1024x64c", 2), ("4096x4096", 3), ("4096x0", 2), ("", 2), ("4096x-1", 2),
                                       ("64x64,", 2)])
def test_parse_shapes_names_the_bad_item(text, dims):
    with pytest.raises(SystemExit) as e:
        parse_shapes(text, dims, "EXAMPLE")
    msg = str(e.value)
    assert msg.startswith("--shapes: ") and "EXAMPLE" in msg and f"is not {dims} positive integers" in msg


@pytest.mark.parametrize("argv", [["gemm", "--shapes", "4096x4096"], ["attention", "--shapes", "1024x64c"]])
def test_a_bad_shape_list_exits_before_any_gpu_work(argv):
    """The message comes from the argument, not from torch or an int() traceback (no GPU needed here)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert str(e.value).startswith("--shapes: ")
