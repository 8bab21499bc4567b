"""Fuzz: the attention backward kernel's options (:func:`tirxpy_kernels.attention_bwd_plan.plan`, which
``attention_bwd_sm90`` checks first). One bad option among defaults is refused with a
:class:`~tirxpy_kernels.errors.KernelConfigError` naming it; good values give a plan that follows them."""
from harness import EXAMPLES, HOSTILE, accept, refuse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tirxpy_kernels.attention_bwd_plan import default_rotate, plan

AREA = "tirxpy_kernels attention backward options"
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
PROBLEM = (2, 8, 4, 1000, 900, 128)       # B, H, HKV, SQ, SK, D: GQA, ragged, head dim 128
JUNK = st.one_of(st.none(), st.floats(allow_nan=True), st.text(max_size=4), st.lists(st.integers(0, 3), max_size=2),
                 st.just(object()), st.complex_numbers(max_magnitude=4), HOSTILE)
NOT_INT = st.one_of(JUNK.filter(lambda v: v is not None), st.booleans())
NOT_FLAG = st.one_of(JUNK.filter(lambda v: v is not None), st.integers().filter(lambda i: i not in (0, 1)))
BAD = {
    "BM": st.one_of(NOT_INT, st.integers().filter(lambda i: i != 64)),
    "STAGES": st.one_of(NOT_INT, st.integers(max_value=0), st.integers(min_value=5)),
    "DQ_SPLIT": st.one_of(JUNK.filter(lambda v: v is not None), st.integers(),
                          st.text(max_size=5).filter(lambda s: s not in ("cols", "keys")), st.just("keys")),
    "FOLD": NOT_FLAG, "PACKED": NOT_FLAG, "ROTATE": st.one_of(NOT_FLAG, st.just(True)),
    "TAIL": st.one_of(NOT_INT, st.integers(max_value=-1), st.integers(min_value=65)),
    "sms": st.one_of(JUNK, st.booleans(), st.integers(max_value=0), st.integers(min_value=4097)),
    "causal": NOT_FLAG, "deterministic": NOT_FLAG, "TRAIL": NOT_FLAG, "FUSE_DQ": NOT_FLAG,
}
GOOD = {
    "BM": st.sampled_from([None, 64]), "STAGES": st.sampled_from([None, 1, 2, 3]),
    "DQ_SPLIT": st.sampled_from([None, "cols"]), "FOLD": st.sampled_from([None, True, False, 0, 1]),
    "ROTATE": st.sampled_from([None, False, 0]), "TAIL": st.integers(0, 64), "sms": st.integers(1, 4096),
    "TRAIL": st.sampled_from([None, True, False, 0, 1]), "FUSE_DQ": st.sampled_from([None, True, False, 0, 1]),
}


@SETTINGS
@given(st.data())
def test_one_bad_option_is_named(data):
    """(``ROTATE=True`` is bad here only because the problem is causal; ``DQ_SPLIT="keys"`` because head dim 128
    splits dQ by columns.)"""
    name = data.draw(st.sampled_from(sorted(BAD)))
    kw = {"causal": True, name: data.draw(BAD[name])}
    refuse(AREA, lambda: plan(*PROBLEM, **kw), names=[name])


@SETTINGS
@given(st.data(), st.booleans(), st.sampled_from([64, 128]))
def test_good_options_give_a_plan_that_follows_them(data, causal, D):
    kw = {n: data.draw(s) for n, s in GOOD.items() if data.draw(st.booleans())}
    if D == 64 and data.draw(st.booleans()):     # head dim 64 also splits dQ by keys (its own 64 keys a consumer)
        kw["DQ_SPLIT"] = "keys"
    if kw.get("STAGES") == 3 and D == 128:       # three stages fit only beside two dS buffers
        kw["TRAIL"] = False
    B, H, HKV, SQ, SK, _ = PROBLEM

    def check(p):
        rotate = default_rotate(D, causal, False, False) if kw.get("ROTATE") is None else bool(kw["ROTATE"])
        waves, sms = kw.get("TAIL", 3), kw.get("sms", 132)
        tail = min(B * HKV, -(-waves * sms // p.kv_blocks)) if causal and waves else 0
        return (p.rotate == rotate and p.tail_heads == tail and p.causal == causal
                and p.STAGES == (kw.get("STAGES") or 2) and p.fold == (kw.get("FOLD") is None or bool(kw["FOLD"]))
                and p.trail == (kw.get("TRAIL") is None or bool(kw["TRAIL"]))
                and p.fuse_dq == bool(kw.get("FUSE_DQ"))
                and p.count_slots == (-(-p.q_blocks * p.group // 8) * 8 if p.fuse_dq else 0)
                and p.dq_split == (kw.get("DQ_SPLIT") or "cols")
                and p.dq_cols == (D // 2 if p.dq_split == "cols" else D)
                and p.k_box == min(p.dq_cols, 64) and p.smem <= 227 * 1024)
    accept(AREA, lambda: plan(B, H, HKV, SQ, SK, D, causal=causal, **kw), check)
