"""mma.sync: warp-level tensor-core MMA (Ampere+), row.col fragments of the PTX ISA figures."""
from .defs import out, reg, row

# name: (shape, d/c dtype, a/b type, #a regs, #b regs, #c regs, d dtype, lowest)
_SHAPES = {
    "m16n8k16_f32_f16_f16_f32": ("m16n8k16", "f32.f16.f16.f32", 4, 2, 4, "float32", "sm_80"),
    "m16n8k16_f32_bf16_bf16_f32": ("m16n8k16", "f32.bf16.bf16.f32", 4, 2, 4, "float32", "sm_80"),
    "m16n8k16_f16_f16_f16_f16": ("m16n8k16", "f16.f16.f16.f16", 4, 2, 2, "uint32", "sm_80"),
    "m16n8k8_f32_f16_f16_f32": ("m16n8k8", "f32.f16.f16.f32", 2, 1, 4, "float32", "sm_80"),
    "m16n8k8_f32_bf16_bf16_f32": ("m16n8k8", "f32.bf16.bf16.f32", 2, 1, 4, "float32", "sm_80"),
    "m16n8k8_f32_tf32_tf32_f32": ("m16n8k8", "f32.tf32.tf32.f32", 4, 2, 4, "float32", "sm_80"),
    "m16n8k32_s32_s8_s8_s32": ("m16n8k32", "s32.s8.s8.s32", 4, 2, 4, "int32", "sm_80"),
    "m16n8k32_f32_e4m3_e4m3_f32": ("m16n8k32", "f32.e4m3.e4m3.f32", 4, 2, 4, "float32", "sm_89"),
    "m16n8k32_f32_e5m2_e5m2_f32": ("m16n8k32", "f32.e5m2.e5m2.f32", 4, 2, 4, "float32", "sm_89"),
}
for _name, (_shape, _types, _na, _nb, _nc, _dt, _lo) in _SHAPES.items():
    row(f"mma_sync_{_name}", f"mma.sync.aligned.{_shape}.row.col.{_types} {{d}}, {{a}}, {{b}}, {{c}};",
        [out("d", _dt, _nc), reg("a", "uint32", _na), reg("b", "uint32", _nb), reg("c", _dt, _nc)],
        scope="warp", lowest=_lo, memory=False)
