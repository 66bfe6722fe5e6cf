#!/usr/bin/env python3
"""tests/reference/make_cuda_host_fixtures.py: writes tests/data/cuda/bf16_v1.bin, the independent reference for
the bf16 conversion of common/backend/cuda/cuda_host.c: fp32 inputs (random over many magnitudes, ties, subnormals,
+-inf, the largest finite values) and torch's Tensor.to(torch.bfloat16) bits for them (as i32), plus the fp32 value
of each bf16 (torch .float()). NaN is checked in the C test directly (torch's NaN payload is not specified).
File format: tests/unit/dapo_fixture.h (magic DAPOFX01)."""
import os
import struct

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "data", "cuda", "bf16_v1.bin")


def main():
    rng = np.random.default_rng(20261130)
    x = (rng.standard_normal(4000) * np.exp(rng.uniform(-30, 30, 4000))).astype(np.float32)
    bits = rng.integers(0, 2**32, 2000, dtype=np.uint64).astype(np.uint32)
    bits = bits[(bits & 0x7F800000) != 0x7F800000]                        # no NaN / inf from raw bits
    ties = (rng.integers(0, 2**16, 500, dtype=np.uint64).astype(np.uint32) << 16) | 0x8000
    ties = ties[(ties & 0x7F800000) != 0x7F800000]
    special = np.array([0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x7F7FFFFF,
                        0x7F7F8000, 0x7F7F7FFF, 0x3F808000, 0x3F818000, 0x3F80FFFF, 0x3F7FFFFF], dtype=np.uint32)
    allbits = np.concatenate([x.view(np.uint32), bits, ties, special])
    xs = allbits.view(np.float32)
    t = torch.from_numpy(xs.copy())
    b = t.to(torch.bfloat16)
    bf_bits = b.view(torch.int16).numpy().astype(np.int32) & 0xFFFF
    back = b.float().numpy().astype(np.float32)
    items = [("x", 1, xs.tobytes()), ("bf16_bits", 2, bf_bits.astype(np.int32).tobytes()), ("back", 1, back.tobytes())]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "wb") as f:
        f.write(b"DAPOFX01")
        f.write(struct.pack("<I", len(items)))
        for name, code, data in items:
            f.write(name.encode().ljust(48, b"\0"))
            f.write(struct.pack("<II", code, len(data) // 4))
            f.write(data)
    print(f"wrote {OUT}: {len(xs)} values (torch {torch.__version__})")


if __name__ == "__main__":
    main()
