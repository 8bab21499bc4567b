"""Signals between GPUs: release stores, acquire loads and release reductions on 32-bit flags in global
memory (a peer's, reached through a mapped peer address, or this GPU's), at GPU or system scope.

PTX ISA 8.x, "Memory Consistency Model" (scopes ``.gpu`` / ``.sys``, release and acquire patterns) and
the ``st`` / ``ld`` / ``red`` / ``atom`` instructions. The rule a protocol follows: the writer makes its
data stores, then signals with a *release* (``st.release.sys`` / ``red.release.sys``) on the flag; the
reader waits with an *acquire* load (``ld.acquire.sys``) until the flag reaches the value it expects,
and only then reads the data. ``.sys`` scope is needed when the two sides are on different GPUs (the
flag or the data crosses NVLink); ``.gpu`` suffices between CTAs of one GPU. A barrier across ranks is
built from these (each rank signals every peer's flag, then waits for its own):

    >>> from tirxpy.intrinsics import get
    >>> get("st_release_sys_u32").ptx, get("ld_acquire_sys_u32").ret_dtype
    ('st.release.sys.global.u32', 'uint32')
    >>> get("wait_geq_sys_u32").ptx
    'ld.acquire.sys.global.u32'

``wait_geq_sys_u32(ptr, v)`` spins (``nanosleep`` between polls) until the flag is ``>= v``; epochs that
only grow make a flag reusable across launches without a reset. No entry here uses ``multimem`` or
multicast objects.
"""
from .defs import gmem, out, reg, row

for _scope in ("gpu", "sys"):
    row(f"st_release_{_scope}_u32", f"st.release.{_scope}.global.u32 [{{ptr}}], {{v}};", [gmem("ptr", "w"), reg("v")],
        lowest="sm_80", doc=f"Store v to the flag at ptr with release semantics at {_scope} scope: every memory "
                            "access of this thread before it (and those it has observed) is visible to a thread that "
                            "acquires the value.")
    row(f"red_release_{_scope}_add_u32", f"red.release.{_scope}.global.add.u32 [{{ptr}}], {{v}};",
        [gmem("ptr", "rw"), reg("v")], lowest="sm_80",
        doc=f"Add v to the flag at ptr with release semantics at {_scope} scope (several signallers, one counter).")
    row(f"atom_acq_rel_{_scope}_add_u32", f"atom.acq_rel.{_scope}.global.add.u32 {{old}}, [{{ptr}}], {{v}};",
        [out("old"), gmem("ptr", "rw"), reg("v")], ret="old", lowest="sm_80",
        doc=f"Add v to the flag at ptr and return the old value, acquire + release at {_scope} scope.")
row("ld_acquire_sys_u32", "ld.acquire.sys.global.u32 {r}, [{ptr}];", [out("r"), gmem("ptr")], ret="r",
    lowest="sm_80", doc="Load the flag at ptr with acquire semantics at system scope (another GPU's release).")
row("fence_acq_rel_sys", "fence.acq_rel.sys;", [], lowest="sm_80",
    doc="Order this thread's accesses before and after it at system scope (turns a relaxed poll into an acquire).")
row("wait_geq_sys_u32",
    """{
    .reg .pred P_ge;
    .reg .b32 R_flag;
    TX_PEER_WAIT:
    ld.acquire.sys.global.u32 R_flag, [{ptr}];
    setp.ge.u32 P_ge, R_flag, {v};
    @P_ge bra TX_PEER_DONE;
    nanosleep.u32 64;
    bra TX_PEER_WAIT;
    TX_PEER_DONE:
    }""",
    [gmem("ptr"), reg("v")], lowest="sm_80", ptx="ld.acquire.sys.global.u32",
    doc="Spin (acquire loads at system scope, nanosleep between polls) until the flag at ptr is >= v.")
