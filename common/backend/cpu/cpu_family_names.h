/* common/backend/cpu/cpu_family_names.h: included first by the sources compiled once per kernel family (cpu_ops.c,
 * cpu_decode.c; the Makefile defines CPU_FAM = generic | avx2 | avx512 and CPU_FAM_LEVEL 0 | 1 | 2 for each object):
 * their public kernels get the family's suffix (cpu_rmsnorm -> cpu_rmsnorm_avx2), and cpu_family.c dispatches to them.
 * Without CPU_FAM (a file that only calls the kernels) nothing is renamed. */
#ifndef DAPO_CPU_FAMILY_NAMES_H
#define DAPO_CPU_FAMILY_NAMES_H
#ifdef CPU_FAM
#define CPU_FAM_CAT2(a, b) a##_##b
#define CPU_FAM_CAT(a, b) CPU_FAM_CAT2(a, b)
#define cpu_linear CPU_FAM_CAT(cpu_linear, CPU_FAM)
#define cpu_linear_add CPU_FAM_CAT(cpu_linear_add, CPU_FAM)
#define cpu_linear_backward CPU_FAM_CAT(cpu_linear_backward, CPU_FAM)
#define cpu_linear_varlen CPU_FAM_CAT(cpu_linear_varlen, CPU_FAM)
#define cpu_linear_backward_varlen CPU_FAM_CAT(cpu_linear_backward_varlen, CPU_FAM)
#define cpu_rmsnorm CPU_FAM_CAT(cpu_rmsnorm, CPU_FAM)
#define cpu_rmsnorm_backward CPU_FAM_CAT(cpu_rmsnorm_backward, CPU_FAM)
#define cpu_rmsnorm_backward_varlen CPU_FAM_CAT(cpu_rmsnorm_backward_varlen, CPU_FAM)
#define cpu_rope_tables CPU_FAM_CAT(cpu_rope_tables, CPU_FAM)
#define cpu_rope CPU_FAM_CAT(cpu_rope, CPU_FAM)
#define cpu_attention CPU_FAM_CAT(cpu_attention, CPU_FAM)
#define cpu_attention_varlen CPU_FAM_CAT(cpu_attention_varlen, CPU_FAM)
#define cpu_attention_backward CPU_FAM_CAT(cpu_attention_backward, CPU_FAM)
#define cpu_attention_backward_varlen CPU_FAM_CAT(cpu_attention_backward_varlen, CPU_FAM)
#define cpu_swiglu CPU_FAM_CAT(cpu_swiglu, CPU_FAM)
#define cpu_swiglu_backward CPU_FAM_CAT(cpu_swiglu_backward, CPU_FAM)
#define cpu_rmsnorm_heads CPU_FAM_CAT(cpu_rmsnorm_heads, CPU_FAM)
#define cpu_rmsnorm_heads_backward CPU_FAM_CAT(cpu_rmsnorm_heads_backward, CPU_FAM)
#define cpu_logprob_entropy CPU_FAM_CAT(cpu_logprob_entropy, CPU_FAM)
#define cpu_logprob_entropy_backward CPU_FAM_CAT(cpu_logprob_entropy_backward, CPU_FAM)
#define cpu_add CPU_FAM_CAT(cpu_add, CPU_FAM)
#define cpu_pack_weights CPU_FAM_CAT(cpu_pack_weights, CPU_FAM)
#define cpu_linear_packed CPU_FAM_CAT(cpu_linear_packed, CPU_FAM)
#define cpu_linear_packed_ex CPU_FAM_CAT(cpu_linear_packed_ex, CPU_FAM)
#define cpu_kv_store_bf16 CPU_FAM_CAT(cpu_kv_store_bf16, CPU_FAM)
#define cpu_paged_attention_bf16 CPU_FAM_CAT(cpu_paged_attention_bf16, CPU_FAM)
#define cpu_pack_weights_bf16 CPU_FAM_CAT(cpu_pack_weights_bf16, CPU_FAM)
#define cpu_linear_packed_bf16_ex CPU_FAM_CAT(cpu_linear_packed_bf16_ex, CPU_FAM)
#define cpu_pack_weights_glu CPU_FAM_CAT(cpu_pack_weights_glu, CPU_FAM)
#define cpu_linear_packed_swiglu CPU_FAM_CAT(cpu_linear_packed_swiglu, CPU_FAM)
#define cpu_linear_packw_ex CPU_FAM_CAT(cpu_linear_packw_ex, CPU_FAM)
#define cpu_linear_packw_swiglu CPU_FAM_CAT(cpu_linear_packw_swiglu, CPU_FAM)
#define cpu_paged_attention CPU_FAM_CAT(cpu_paged_attention, CPU_FAM)
#define cpu_kv_store CPU_FAM_CAT(cpu_kv_store, CPU_FAM)
#endif
#endif
