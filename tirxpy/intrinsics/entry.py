"""One native instruction shape: its operands, PTX template, lowest target, scope and checks,
and its rendering as a ``__device__ __forceinline__`` C++ helper with ``asm volatile``.

The PTX template names operands in braces (``{bar}``); a vector operand renders as
``{%0, %1, ...}``, a predicate operand as a PTX predicate register set from / stored to a
32-bit value around the instruction. ``%`` in the template is literal PTX (``%clock``).

``cxx``: pure integer arithmetic may also give a C++ expression of the returned value (operands in
braces, as C++ values). The helper then returns it instead of running the asm, so the C++ compiler
sees through the call: it folds constants and shares subexpressions across calls, which it cannot
do with ``asm volatile``. The PTX template stays the instruction's reference form.

    >>> e = Intrinsic("my_add", "add.u32 {d}, {a}, {b};",
    ...               [Operand("d", "reg", "uint32", "w"), Operand("a", "reg", "uint32"), Operand("b", "reg", "uint32")],
    ...               ret="d", memory=False)
    >>> print(e.render_helper())
    __device__ __forceinline__ unsigned tx_my_add(unsigned a, unsigned b) {
      unsigned d;
      asm volatile("add.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
      return d;
    }
    >>> e.render_call(["x", "7u"])
    'tx_my_add(x, 7u)'
"""
from __future__ import annotations

import keyword
import operator
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from tirxpy.errors import shown

from .errors import IntrinsicError, OperandError, OperandSpecError, RegistrationError, TargetError
from tirxpy.layout.coords import is_int

from .target import SUPPORTED_ARCHS, Requirement, parse_arch

#: Operand kinds: how codegen renders an argument and which C++ type / asm constraint it gets.
KINDS = {
    "reg": "a value of the operand's dtype in a register",
    "imm": "a compile-time integer constant (C++ template argument, asm constraint \"n\")",
    "pred": "a boolean (a PTX predicate inside the asm)",
    "smem_addr": "32-bit shared::cta address (__cvta_generic_to_shared)",
    "smem_addr16": "shared::cta address in 16-byte units (addr >> 4; the element must be 16-byte aligned), rendered as "
                   "the buffer's base >> 4 plus the element's offset, so constant offsets fold",
    "cluster_addr": "32-bit shared::cluster address (from mapa)",
    "tmem_addr": "32-bit tensor-memory address (lane << 16 | column)",
    "gmem_ptr": "generic pointer to global memory",
    "tensormap": "pointer to a __grid_constant__ CUtensorMap kernel parameter",
    "desc64": "64-bit matrix descriptor",
}
ACCESS = ("r", "w", "rw")
SCOPES = ("thread", "warp", "warpgroup", "cta", "cluster")

# dtype -> (C++ type, asm constraint)
_REG_TYPES = {
    "bool": ("unsigned", "r"),
    "int8": ("int", "r"), "uint8": ("unsigned", "r"),
    "int16": ("short", "h"), "uint16": ("unsigned short", "h"),
    "int32": ("int", "r"), "uint32": ("unsigned", "r"),
    "int64": ("long long", "l"), "uint64": ("unsigned long long", "l"),
    "float16": ("unsigned short", "h"), "bfloat16": ("unsigned short", "h"),  # raw bits: __half_as_ushort(x)
    "float32": ("float", "f"), "float64": ("double", "d"),
}
_KIND_DTYPE = {"smem_addr": "uint32", "smem_addr16": "uint32", "cluster_addr": "uint32", "tmem_addr": "uint32", "desc64": "uint64",
               "gmem_ptr": "uint64", "tensormap": "uint64", "pred": "bool", "imm": "int32"}
#: Kinds that are addresses: always asm inputs; their access says how the memory is used.
ADDRESS_KINDS = frozenset({"smem_addr", "smem_addr16", "cluster_addr", "tmem_addr", "gmem_ptr", "tensormap"})
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
#: C++ keywords (and the helper's own names): not usable as operand names, which become C++ parameters.
CXX_RESERVED = frozenset("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield
decltype default delete do double dynamic_cast else enum explicit export extern false float for friend goto if
inline int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public
register reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch
template this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
wchar_t while xor xor_eq unsigned""".split())
MAX_COUNT = 128     #: most registers one vector operand has (tcgen05.ld .32x32b.x128)
MAX_VALUES = 1 << 16    #: most allowed values one imm operand lists
IMM_MIN, IMM_MAX = -(1 << 31), (1 << 31) - 1    #: an imm operand is a C++ ``int`` template argument
MAX_ALIGN = 256                                  #: the largest ``align`` of an address operand, in bytes
ALIGNED_KINDS = ("gmem_ptr", "smem_addr")        #: the address kinds whose alignment codegen holds to ``align``


def is_identifier(name) -> bool:
    """A C identifier of at most 64 characters that is no C++ keyword."""
    return isinstance(name, str) and _IDENT.fullmatch(name) is not None and name not in CXX_RESERVED

_BAD_TEXT = re.compile(r"[^\t\n\x20-\x5b\x5d-\x7e]")   # all but printable ASCII (no backslash), tab and newline
_PLACEHOLDER = re.compile(r"\{\w+\}")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)     # PTX comments, as in C++
_BAD_CXX = re.compile(r"[;{}\"'#\\\x00-\x1f]|[^\x00-\x7e]|//|/\*")
Check = Callable[[Mapping[str, int]], "str | None"]


@dataclass(frozen=True)
class Operand:
    """One operand. ``vector`` (default: ``count > 1``) makes it a brace list of ``count`` registers
    (a C++ array reference in the helper).

    ``values``: the allowed values of an ``imm`` operand (checked when the value is known).

    ``access`` (``"r"``, ``"w"``, ``"rw"``) of an address operand says what the instruction does to the memory
    behind it; for a ``tensormap`` that is the global tensor the map covers (the map itself is only read), so a
    TMA store declares ``Operand("tmap", "tensormap", access="w")`` and the launch then checks that the tensor
    shares no memory with the kernel's other tensor arguments.

    ``align`` (a ``gmem_ptr`` or ``smem_addr`` operand): the bytes the instruction moves at the address, where the
    template's opcode does not say it (an address computed inside the template, such as ``add.u64 a, {p}, 16;
    ld.global.v4.b32 ..., [a];``): a power of two in [1, 256]. The address is held to the larger of it and the
    opcode's width (:func:`tirxpy.lower.codegen.intrin.access_bytes`): a global tensor's base at launch, a shared
    element at build. ``Operand("p", "gmem_ptr", align=16)``.
    """

    name: str
    kind: str
    dtype: str | None = None
    access: str = "r"
    count: int = 1
    values: tuple = ()
    vector: bool | None = None
    align: int | None = None

    def __post_init__(self):
        if not is_identifier(self.name):
            raise OperandSpecError(f"operand name {shown(self.name, 60)} is not a C identifier (letters, digits, _; at "
                                   "most 64 characters; no C++ keyword)")
        if not isinstance(self.kind, str) or self.kind not in KINDS:
            raise OperandSpecError(f"operand {shown(self.name)}: unknown kind {shown(self.kind, 60)}; use one of "
                                   f"{sorted(KINDS)}")
        if not isinstance(self.access, str) or self.access not in ACCESS:
            raise OperandSpecError(f"operand {shown(self.name)}: access must be one of {ACCESS}, got "
                                   f"{shown(self.access, 60)}")
        dt = self.dtype if self.dtype is not None else _KIND_DTYPE.get(self.kind)
        if dt is None:
            raise OperandSpecError(f"operand {shown(self.name)} of kind 'reg' needs a dtype, e.g. 'uint32' or "
                                   "'float32'")
        if not isinstance(dt, str) or dt not in _REG_TYPES:
            raise OperandSpecError(f"operand {shown(self.name)}: dtype {shown(dt, 60)} has no register form; use one "
                                   f"of {sorted(_REG_TYPES)}")
        object.__setattr__(self, "dtype", dt)
        if not is_int(self.count) or not 1 <= operator.index(self.count) <= MAX_COUNT:
            raise OperandSpecError(f"operand {shown(self.name)}: count must be an int in [1, {MAX_COUNT}], got "
                                   f"{shown(self.count, 60)}")
        object.__setattr__(self, "count", operator.index(self.count))
        if self.vector is not None and not isinstance(self.vector, bool):
            raise OperandSpecError(f"operand {shown(self.name)}: vector must be True, False or None, got "
                                   f"{shown(self.vector, 60)}")
        if self.vector is None:
            object.__setattr__(self, "vector", self.count > 1)
        if not isinstance(self.values, (tuple, list, range)) or len(self.values) > MAX_VALUES or not all(
                is_int(v) and IMM_MIN <= operator.index(v) <= IMM_MAX for v in self.values):
            raise OperandSpecError(f"operand {shown(self.name)}: values must be a tuple of at most {MAX_VALUES} ints "
                                   f"in [-2**31, 2**31), got {shown(self.values, 60)}")
        object.__setattr__(self, "values", tuple(operator.index(v) for v in self.values))
        if self.values and self.kind != "imm":
            raise OperandSpecError(f"operand {shown(self.name)}: values= applies to 'imm' operands only, not "
                                   f"{shown(self.kind)}")
        if self.kind in ("imm", "pred", "tensormap", "gmem_ptr") and self.vector:
            raise OperandSpecError(f"operand {shown(self.name)}: a {self.kind} operand cannot be a vector "
                                   f"(count={self.count})")
        if self.kind == "imm" and self.access != "r":
            raise OperandSpecError(f"operand {shown(self.name)}: an imm operand is read-only")
        if self.align is not None:
            if not is_int(self.align) or not 1 <= operator.index(self.align) <= MAX_ALIGN or \
                    operator.index(self.align) & (operator.index(self.align) - 1):
                raise OperandSpecError(f"operand {shown(self.name)}: align must be a power of two in [1, {MAX_ALIGN}] "
                                       f"(the bytes the instruction moves at the address), got {shown(self.align, 60)}")
            if self.kind not in ALIGNED_KINDS:
                raise OperandSpecError(f"operand {shown(self.name)}: align= applies to {' and '.join(ALIGNED_KINDS)} "
                                       f"operands (an address the instruction moves bytes at), not {shown(self.kind)}")
            object.__setattr__(self, "align", operator.index(self.align))

    @property
    def is_output(self) -> bool:
        """Written by the instruction as a register (an asm output); addresses never are."""
        return self.access != "r" and self.kind not in ADDRESS_KINDS

    @property
    def ctype(self) -> str:
        if self.kind == "tensormap":        # the map itself is always read, whatever the instruction does to its tensor
            return "const void*"
        if self.kind == "gmem_ptr":
            return "const void*" if self.access == "r" else "void*"
        if self.kind == "pred":
            return "bool"
        return _REG_TYPES[self.dtype][0]

    @property
    def constraint(self) -> str:
        if self.kind == "imm":
            return "n"
        if self.kind in ("gmem_ptr", "tensormap"):
            return "l"
        if self.kind == "pred":
            return "r"
        return _REG_TYPES[self.dtype][1]


@dataclass(eq=False)
class Intrinsic:
    """A native instruction shape. ``name`` is a Python identifier (``T.ptx.<name>``).

    ``ret`` names the write operand the helper returns (None: the helper returns void and
    other write operands are C++ references). ``checks`` take the known constant call
    arguments (by operand name) and return None or a reason the call is invalid.
    """

    name: str
    template: str
    operands: Sequence[Operand] = ()
    ret: str | None = None
    lowest: str = "sm_80"
    highest: str | None = None
    why_highest: str = ""
    scope: str = "thread"
    modifiers: tuple = ()
    checks: Sequence[Check] = ()
    memory: bool = True
    ptx: str = ""
    doc: str = ""
    cxx: str = ""
    requirement: Requirement = field(init=False)

    def __post_init__(self):
        if not is_identifier(self.name) or keyword.iskeyword(self.name):
            raise RegistrationError(f"intrinsic name {shown(self.name, 60)} must be a Python and C identifier of at "
                                    "most 64 characters (it is used as T.ptx.<name> and in the C++ helper tx_<name>)")
        if not isinstance(self.template, str) or not self.template.strip():
            raise RegistrationError(f"intrinsic {self.name}: template must be a non-empty PTX string, got "
                                    f"{shown(self.template, 60)}")
        bad = _BAD_TEXT.search(self.template)
        if bad:
            raise RegistrationError(f"intrinsic {self.name}: template contains {bad.group(0)!r}; PTX text is printable "
                                    f"ASCII with no backslashes (write lines as separate statements)")
        if not isinstance(self.scope, str) or self.scope not in SCOPES:
            raise RegistrationError(f"intrinsic {self.name}: scope must be one of {SCOPES}, got "
                                    f"{shown(self.scope, 60)}")
        for f in ("ptx", "doc", "cxx", "why_highest"):
            if not isinstance(getattr(self, f), str):
                raise RegistrationError(f"intrinsic {self.name}: {f}= must be a str, got {shown(getattr(self, f), 60)}")
        if not isinstance(self.memory, bool):
            raise RegistrationError(f"intrinsic {self.name}: memory= must be True or False, got "
                                    f"{shown(self.memory, 60)}")
        for f in ("operands", "checks", "modifiers"):
            if isinstance(getattr(self, f), (str, bytes, dict)) or not isinstance(getattr(self, f), (tuple, list)):
                raise RegistrationError(f"intrinsic {self.name}: {f}= must be a list, got "
                                        f"{shown(getattr(self, f), 60)}")
        self.operands = tuple(self.operands)
        self.checks = tuple(self.checks)
        for o in self.operands:
            if not isinstance(o, Operand):
                raise RegistrationError(f"intrinsic {self.name}: operands must be Operand objects, got {shown(o, 60)}")
        for c in self.checks:
            if not callable(c):
                raise RegistrationError(f"intrinsic {self.name}: checks= holds {shown(c, 60)}, which is not callable; "
                                        "each check is a function of the known arguments returning None or a reason")
        names = [o.name for o in self.operands]
        if len(set(names)) != len(names):
            raise RegistrationError(f"intrinsic {self.name}: operand names repeat: {names}")
        taken = {f"{o.name}_u32" for o in self.operands if o.kind == "pred" and o.is_output} & set(names)
        if taken:
            raise RegistrationError(f"intrinsic {self.name}: operand name(s) {sorted(taken)} are the helper's local of "
                                    f"the predicate output of that name; rename the operand")
        used = set(re.findall(r"\{(\w+)\}", self.template))
        unknown = used - set(names)
        if unknown:
            raise RegistrationError(f"intrinsic {self.name}: template names {sorted(unknown)} that are not operands {names}")
        unused = [n for n in names if n not in used]
        if unused:
            raise RegistrationError(f"intrinsic {self.name}: operands {unused} do not appear in the template")
        if self.ret is not None:
            if not isinstance(self.ret, str) or self.ret not in names:
                raise RegistrationError(f"intrinsic {self.name}: ret={shown(self.ret, 60)} names no operand; operands: "
                                        f"{names}")
            o = self.operand(self.ret)
            if not o.is_output or o.access != "w" or o.vector:
                raise RegistrationError(f"intrinsic {self.name}: ret={shown(self.ret)} must name a scalar write "
                                        "operand")
        if self.cxx:
            self._check_cxx(names)
        for f in ("lowest", "highest"):
            v = getattr(self, f)
            if v is not None or f == "lowest":
                if not isinstance(v, str) or v not in SUPPORTED_ARCHS:
                    raise RegistrationError(f"intrinsic {self.name}: {f}={shown(v, 60)} is not a target NVRTC compiles "
                                            f"for; use one of {', '.join(SUPPORTED_ARCHS)}")
        if self.highest is not None and parse_arch(self.highest).sm < parse_arch(self.lowest).sm:
            raise RegistrationError(f"intrinsic {self.name}: highest={shown(self.highest)} is below "
                                    f"lowest={shown(self.lowest)}")
        self.requirement = Requirement(self.lowest, self.highest, self.why_highest)
        guard = _bare_guard(self.template)
        if guard is not None:
            raise RegistrationError(f"intrinsic {self.name}: template statement {shown(guard, 60)} is a predicate "
                                    "guard with no instruction after it; write the guarded instruction after it ('@p "
                                    "bra done;')")
        code = _COMMENT.sub("", _PLACEHOLDER.sub("x", self.template)).rstrip()
        if code and not code.endswith((";", "}", ":")):
            last = _COMMENT.sub("", self.template).rstrip().replace(";", "\n").splitlines()[-1].strip()
            raise RegistrationError(f"intrinsic {self.name}: template statement {shown(last, 60)} has no ';' after it; "
                                    f"every PTX statement ends with a semicolon ({last + ';'!r:.60})")
        if not self.ptx:
            self.ptx = _mnemonic(self.template)
        self.__tirx_intrinsic__ = self.name

    def _check_cxx(self, names):
        why = None
        if self.ret is None or self.memory:
            why = "needs ret= (the value the expression computes) and memory=False (no side effects)"
        elif any(o.kind in ("pred", "imm") or o.vector or (o.name != self.ret and o.access != "r")
                 for o in self.operands):
            why = "takes scalar read operands only (no predicates, immediates, vectors or other outputs)"
        else:
            used = set(re.findall(r"\{(\w+)\}", self.cxx))
            if self.ret in used or used - set(names):
                why = f"may name the read operands {[n for n in names if n != self.ret]} only, got {sorted(used)}"
        bad = _BAD_CXX.search(_PLACEHOLDER.sub("", self.cxx)) if why is None else None
        if bad:
            why = (f"is one C++ expression of the operands in ASCII: no {bad.group(0)!r} (statements, braces, "
                   f"strings, comments and preprocessor lines are not expressions)")
        if why:
            raise RegistrationError(f"intrinsic {self.name}: a C++ body (cxx=) {why}")

    # ----- metadata -------------------------------------------------------------------
    def operand(self, name: str) -> Operand:
        for o in self.operands:
            if o.name == name:
                return o
        raise OperandError(f"intrinsic {self.name} has no operand {shown(name)}; its operands are "
                           f"{[o.name for o in self.operands]}")

    @property
    def args(self) -> tuple:
        """Operands a call passes, in order (all but the returned one)."""
        return tuple(o for o in self.operands if o.name != self.ret)

    @property
    def n_args(self) -> int:
        return len(self.args)

    @property
    def ret_dtype(self) -> str | None:
        return None if self.ret is None else self.operand(self.ret).dtype

    def helper_name(self) -> str:
        return f"tx_{self.name}"

    def help_text(self) -> str:
        """What ``help(T.ptx.<name>)`` prints: the call, the instruction and its targets, the doc, each operand.

            >>> from tirxpy.intrinsics import get
            >>> print(get("mbarrier_init").help_text())     # doctest: +ELLIPSIS
            T.ptx.mbarrier_init(bar, count)
            <BLANKLINE>
            mbarrier.init.shared::cta.b64 on sm_80, scope thread.
            ...
            Operands:
              bar    smem_addr uint32, read: 32-bit shared::cta address (__cvta_generic_to_shared)
              count  reg uint32, read: a value of the operand's dtype in a register
        """
        ret = f" -> {self.ret_dtype}" if self.ret is not None else ""
        lines = [f"T.ptx.{self.name}({', '.join(o.name for o in self.args)}){ret}", "",
                 f"{self.ptx} on {self.requirement}, scope {self.scope}."]
        if self.doc:
            lines.append(self.doc)
        lines += ["", "Operands:"]
        width = max([len(o.name) for o in self.operands] + [1])
        access = {"r": "read", "w": "written", "rw": "read and written"}
        for o in self.operands:
            what = f"{o.kind} {o.dtype}" + (f" x{o.count}" if o.count > 1 else "")
            tail = " (returned)" if o.name == self.ret else ""
            lines.append(f"  {o.name:<{width}}  {what}, {access[o.access]}{tail}: {KINDS[o.kind]}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Intrinsic({self.name}: {self.ptx}, {self.requirement}, scope={self.scope})"

    def __call__(self, *args, **kwargs):
        raise IntrinsicError(
            f"{self.name} is a device instruction: call it inside a tirxpy kernel (T.ptx.{self.name}(...) or "
            f"this object), not from Python")

    # ----- checks ---------------------------------------------------------------------
    def check_target(self, arch) -> None:
        """Raise TargetError if ``arch`` does not have this instruction."""
        reason = self.requirement.missing(arch)
        if reason is not None:
            raise TargetError(f"{self.ptx} {reason}")

    def supports(self, arch) -> bool:
        return self.requirement.missing(arch) is None

    def check_args(self, known: Mapping[str, int] | Sequence) -> None:
        """Validate the call arguments whose values are known at build time.

        ``known`` maps operand names to Python ints, or is the positional argument list
        (None for values not known). Immediate operands must be known.
        """
        if not isinstance(known, Mapping):
            known = list(known)
            if len(known) != self.n_args:
                raise OperandError(f"{self.name} takes {self.n_args} arguments "
                                   f"({', '.join(o.name for o in self.args)}), got {len(known)}")
            known = {o.name: v for o, v in zip(self.args, known) if v is not None}
        for o in self.args:
            v = known.get(o.name)
            if o.kind == "imm":
                if v is None:
                    raise OperandError(f"{self.name}: operand {shown(o.name)} must be a compile-time integer constant")
                if not is_int(v) or not IMM_MIN <= operator.index(v) <= IMM_MAX:
                    raise OperandError(f"{self.name}: operand {shown(o.name)} must be an int in [-2**31, 2**31) (a C++ "
                                       f"int template argument), got {shown(v, 60)}")
                v = operator.index(v)
                if o.values and v not in o.values:
                    raise OperandError(f"{self.name}: operand {shown(o.name)} = {v} is not one of {list(o.values)}")
        for chk in self.checks:
            try:
                reason = chk(known)
            except KeyError:  # the check needs a value that is not known at build time
                reason = None
            except Exception as e:  # noqa: BLE001 - a registered check is user code: its failure is named as such
                try:
                    label = getattr(chk, "__name__", chk)
                except Exception:   # noqa: BLE001  (a __getattr__ of its own that raises)
                    label = chk
                raise OperandError(f"{self.name}: the check {shown(label, 60)} raised "
                                   f"{type(e).__name__}: {e} on the arguments {shown(dict(known), 120)}; fix the check "
                                   f"(return None or a reason string)") from e
            if reason:
                raise OperandError(f"{self.name}: {reason}")

    # ----- rendering ------------------------------------------------------------------
    def _numbering(self):
        outs = [o for o in self.operands if o.is_output]
        ins = [o for o in self.operands if not o.is_output]
        first, k = {}, 0
        for o in outs + ins:
            first[o.name] = k
            k += o.count
        return outs, ins, first

    def render_helper(self) -> str:
        """The C++ text of this instruction's ``__device__ __forceinline__`` helper."""
        if self.cxx:
            o = self.operand(self.ret)
            params = ", ".join(f"{a.ctype} {a.name}" for a in self.args)
            body = re.sub(r"\{(\w+)\}", r"\1", self.cxx)
            return (f"__device__ __forceinline__ {o.ctype} {self.helper_name()}({params}) {{\n"
                    f"  return ({o.ctype})({body});\n}}")
        outs, ins, first = self._numbering()
        preds_in = [o for o in ins if o.kind == "pred"]
        preds_out = [o for o in outs if o.kind == "pred"]
        pname = {o.name: f"P_{o.name}" for o in preds_in + preds_out}

        def sub(m):
            n = m.group(1)
            if n in pname:
                return pname[n]
            o, k = self.operand(n), first[n]
            if not o.vector:
                return f"%{k}"
            return "{" + ", ".join(f"%{k + i}" for i in range(o.count)) + "}"

        body = re.sub(r"\{(\w+)\}", sub, self.template.replace("%", "%%"))
        lines = []
        if pname:
            lines.append("{")
            lines.append(".reg .pred " + ", ".join(pname.values()) + ";")
            lines += [f"setp.ne.b32 {pname[o.name]}, %{first[o.name]}, 0;" for o in preds_in]
        lines += [ln.strip() for ln in body.strip().splitlines() if ln.strip()]
        if pname:
            lines += [f"selp.u32 %{first[o.name]}, 1, 0, {pname[o.name]};" for o in preds_out]
            lines.append("}")
        asm = "\\n\\t".join(ln.replace('"', '\\"') for ln in lines) if len(lines) > 1 else lines[0].replace('"', '\\"')

        def cexpr(o, i=None):
            ref = o.name if i is None else f"{o.name}[{i}]"
            if o.kind == "pred":
                return f"(unsigned){ref}" if o.access == "r" else f"{o.name}_u32"
            return ref

        def cons(o):
            pre = {"r": "", "w": "=", "rw": "+"}[o.access] if o.is_output else ""
            c = "r" if o.kind == "pred" else o.constraint
            return [f'"{pre}{c}"({cexpr(o, i if o.vector else None)})' for i in range(o.count)]

        out_c = [c for o in outs for c in cons(o)]
        in_c = [c for o in ins for c in cons(o)]
        clob = ' : "memory"' if self.memory else ""
        if out_c or in_c or clob:
            asm_stmt = f'asm volatile("{asm}" : {", ".join(out_c)} : {", ".join(in_c)}{clob});'
            asm_stmt = asm_stmt.replace(" :  : ", " :: ").replace(" : )", ")").replace(" : )", ")")
        else:
            asm_stmt = f'asm volatile("{asm}");'

        params = []
        for o in self.args:
            if o.kind == "imm":
                continue
            if o.vector:
                const = "" if o.is_output else "const "
                params.append(f"{const}{o.ctype} (&{o.name})[{o.count}]")
            elif not o.is_output:
                params.append(f"{o.ctype} {o.name}")
            else:
                params.append(f"{o.ctype}& {o.name}")
        tmpl = [f"int {o.name}" for o in self.args if o.kind == "imm"]
        rtype = "void" if self.ret is None else ("bool" if self.operand(self.ret).kind == "pred" else self.operand(self.ret).ctype)
        head = (f"template <{', '.join(tmpl)}>\n" if tmpl else "")
        head += f"__device__ __forceinline__ {rtype} {self.helper_name()}({', '.join(params)}) {{"
        out = [head]
        for o in outs:
            if o.kind == "pred":
                out.append(f"  unsigned {o.name}_u32;")
            elif o.name == self.ret:
                out.append(f"  {o.ctype} {o.name};")
        out.append("  " + asm_stmt)
        for o in preds_out:
            if o.name != self.ret:
                out.append(f"  {o.name} = {o.name}_u32 != 0;")
        if self.ret is not None:
            o = self.operand(self.ret)
            out.append(f"  return {o.name}_u32 != 0;" if o.kind == "pred" else f"  return {o.name};")
        out.append("}")
        return "\n".join(out)

    def render_call(self, args: Sequence[str]) -> str:
        """C++ call of the helper with argument expressions in ``args`` order (immediates first
        become template arguments)."""
        args = list(args)
        if len(args) != self.n_args:
            raise OperandError(f"{self.name} takes {self.n_args} arguments "
                               f"({', '.join(o.name for o in self.args)}), got {len(args)}")
        tmpl = [a for o, a in zip(self.args, args) if o.kind == "imm"]
        rest = [a for o, a in zip(self.args, args) if o.kind != "imm"]
        t = f"<{', '.join(tmpl)}>" if tmpl else ""
        return f"{self.helper_name()}{t}({', '.join(rest)})"


def _bare_guard(template: str):
    """The first statement of ``template`` that is a predicate guard alone (``@p``, ``@!p``), or None.

        >>> _bare_guard("setp.eq.u32 p, {a}, 0; @p bra done;"), _bare_guard("@!p ;")
        (None, '@!p')
    """
    for ln in template.replace(";", "\n").splitlines():
        toks = ln.split()
        if len(toks) == 1 and toks[0].startswith("@"):
            return toks[0]
    return None


def _mnemonic(template: str) -> str:
    """The first instruction of a template without its operands: 'mbarrier.init.shared::cta.b64'."""
    for ln in template.replace(";", "\n").splitlines():
        ln = ln.strip()
        if not ln or ln.startswith(("{", "}", ".reg")) or ln.endswith(":"):
            continue
        tok = ln.split()[0]
        if tok.startswith("@"):
            tok = ln.split()[1]
        return ".".join(p for p in tok.split(".") if p not in ("sync", "aligned"))
    return template.strip()
