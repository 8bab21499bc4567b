"""The harness itself: each outcome is reachable and is reported as such."""
import builtins

import pytest
from harness import FINDINGS, SENTINEL, Hostile, HostileError, classify

from tirxpy.errors import TirxError, TirxValueError, shown


def _raise(e):
    raise e


def test_a_typed_error_naming_the_fault_is_a_refusal():
    assert classify("_harness", lambda: _raise(TirxValueError("extent 0 must be positive; drop it")), names=["extent"]) == "refused"


def test_untyped_errors_are_crashes():
    assert classify("_harness", lambda: _raise(KeyError("x"))) == "crash"
    assert classify("_harness", lambda: _raise(MemoryError())) == "crash"


def test_a_typed_error_that_names_nothing_is_unhelpful():
    assert classify("_harness", lambda: _raise(TirxValueError("bad input, sorry about that")), names=["extent"]) == "unhelpful"
    assert classify("_harness", lambda: _raise(TirxValueError("bad"))) == "unhelpful"


def test_accepting_bad_input_is_a_wrong_answer_unless_allowed():
    assert classify("_harness", lambda: 3) == "wrong"
    assert classify("_harness", lambda: 3, allow=lambda v: v == 3) == "accepted"


def test_a_loop_past_the_cap_is_a_hang():
    def spin():
        while True:
            pass
    assert classify("_harness", spin, seconds=0.2) == "hang"


def test_allocating_past_the_memory_cap_is_a_crash_not_an_oom():
    assert classify("_harness", lambda: bytearray(3 << 30), mem=1 << 30) == "crash"


def test_a_payload_that_touches_the_sentinel_is_code_execution():
    def payload():
        setattr(builtins, SENTINEL, True)
        raise TirxValueError("refused after running, too late")
    assert classify("_harness", payload) == "executed"


def test_the_root_error_is_a_base_of_the_builtins_it_stands_for():
    with pytest.raises(ValueError):
        _raise(TirxValueError("x"))
    assert issubclass(TirxValueError, TirxError)


def test_a_hostile_value_runs_no_code_of_its_own_unnoticed():
    h = Hostile()
    for use in (str, repr, bool, int, float, hash, len, iter, lambda v: f"{v}", lambda v: f"{v:>4}", lambda v: v == 1,
                lambda v: 1 == v, lambda v: v < 1, lambda v: v + 1, lambda v: v[0], lambda v: 1 in v,
                lambda v: v.shape, lambda v: __import__("operator").index(v)):
        with pytest.raises(HostileError):
            use(h)
    assert shown(h) == "<Hostile object>"


def test_an_escaped_hostile_error_is_a_crash_and_says_so():
    def escape():
        raise TirxValueError(f"bad option {Hostile()}")      # the message's own formatting runs the value's code
    assert classify("_harness", escape) == "crash"
    assert "Hostile" in FINDINGS[-1][2]
    assert classify("_harness", lambda: Hostile()) == "wrong"       # (a hostile value returned is reported, safely)
    assert "<Hostile object>" in FINDINGS[-1][2]
