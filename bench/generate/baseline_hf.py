#!/usr/bin/env python3
"""bench/generate baseline: transformers' generate() on the same Qwen2ForCausalLM checkpoint as ours, fp32, eager
attention, use_cache=True, sampling at temperature 1 (top_k=0, top_p=1.0: no truncation, like ours), exactly
--new tokens per sequence (min_new_tokens = max_new_tokens, EOS never stops it), B prompts of P random tokens
(no padding), torch.set_num_threads(2) (--threads); run.sh sets the PERF.md environment (OPENBLAS_CORETYPE,
OMP_WAIT_POLICY=PASSIVE, OPENBLAS_THREAD_TIMEOUT, MALLOC_*). Median over --steps runs after --warmup runs.

  baseline_hf.py --model DIR --batch B [--prompt P] [--new T] [--steps K] [--warmup W]
Prints BASE_GEN_TOK_S=<generated tokens / wall seconds>.
"""
import argparse
import statistics
import time

import torch
import transformers
from transformers import Qwen2ForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = Qwen2ForCausalLM.from_pretrained(a.model, attn_implementation="eager").float().eval()
    V = model.config.vocab_size
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, V, (a.batch, a.prompt), generator=g)
    mask = torch.ones_like(ids)
    print(f"baseline: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"threads {torch.get_num_threads()}, fp32 eager attention, generate(do_sample=True, use_cache=True)")
    times = []
    with torch.inference_mode():
        for it in range(a.warmup + a.steps):
            torch.manual_seed(it)
            t0 = time.perf_counter()
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0,
                                 top_p=1.0, max_new_tokens=a.new, min_new_tokens=a.new, use_cache=True,
                                 pad_token_id=0)
            dt = time.perf_counter() - t0
            assert out.shape == (a.batch, a.prompt + a.new), out.shape
            if it >= a.warmup:
                times.append(dt)
    med = statistics.median(times)
    tps = a.batch * a.new / med
    print(f"baseline: batch {a.batch}, prompt {a.prompt}, {a.batch * a.new} new tokens per run, median {tps:.1f} tok/s "
          f"(min {a.batch * a.new / max(times):.1f}, max {a.batch * a.new / min(times):.1f})")
    print(f"BASE_GEN_TOK_S={tps:.1f}")


if __name__ == "__main__":
    main()
