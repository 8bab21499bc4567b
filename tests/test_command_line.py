"""tirxpy.command_line: the command lines' check of main(argv)'s argument (the CLIs' cases: tests/fuzz/test_cli.py)."""
import sys

from tirxpy.command_line import checked_argv


def test_words_pass_as_a_new_list_and_none_reads_sys_argv(monkeypatch):
    words = ["--table", "S[4 : 1]"]
    got = checked_argv(words, "tirxpy layout")
    assert got == words and got is not words
    assert checked_argv(("a", "b"), "p") == ["a", "b"]
    monkeypatch.setattr(sys, "argv", ["prog", "x", "y"])
    assert checked_argv(None, "p") == ["x", "y"]


class _Unprintable:
    def __repr__(self):
        raise ZeroDivisionError("the value's own __repr__ ran")

    __str__ = __format__ = __repr__


def test_a_word_that_is_no_str_or_an_argv_that_is_no_list_is_named_on_stderr(capsys):
    assert checked_argv(["gemm", _Unprintable()], "tirxpy compile") is None
    assert capsys.readouterr().err == ("tirxpy compile: error: argv must be a list of str (the command line's words); "
                                       "argv[1] is <_Unprintable object> (_Unprintable)\n")
    assert checked_argv("S[4 : 1]", "tirxpy layout") is None
    assert "argv is 'S[4 : 1]' (str)" in capsys.readouterr().err
