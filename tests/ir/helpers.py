"""Shared checks for the IR tests."""
import pytest

from tirxpy.ir import T, structural_equal


def round_trip(kernel):
    """print -> parse -> equal, and the printed text is a fixed point."""
    text = str(kernel)
    again = T.parse_script(text, verify=False)
    assert structural_equal(kernel, again), text + "\n---\n" + str(again)
    assert str(again) == text
    return again


def raises_at(exc, match, fn, line_text):
    """The error has the type, the message, and points at the source line shown."""
    with pytest.raises(exc, match=match) as e:
        fn()
    text = str(e.value)
    assert e.value.span is not None, text
    assert line_text in text, text
    assert "^" in text, text
    return e.value
