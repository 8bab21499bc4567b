"""tirxpy/layout/atoms/_check.py: argument checks of the hardware atoms."""
import pytest

from tirxpy.layout.atoms._check import choice, positive_int
from tirxpy.layout.errors import LayoutError


def test_choice_returns_a_member_of_the_same_kind():
    assert choice(2, (1, 2, 4), "repeat") == 2
    assert choice("k", ("m", "k"), "major") == "k"


@pytest.mark.parametrize("bad", [2.0, True, 3, "2"])
def test_choice_refuses_other_values_and_kinds(bad):
    with pytest.raises(LayoutError, match=r"repeat must be one of 1, 2, 4, got") as e:
        choice(bad, (1, 2, 4), "repeat", hint="try 2")
    assert str(e.value).endswith("; try 2")


def test_positive_int():
    assert positive_int(3, "n") == 3
    for bad in (0, -1, 1.5, "3"):
        with pytest.raises(LayoutError, match="n must be a positive int"):
            positive_int(bad, "n")
