#!/usr/bin/env python3
"""bench/generate baseline: transformers' generate() on the same Qwen2ForCausalLM checkpoint as ours, fp32, SDPA
attention (--attn; issue 23: every PyTorch baseline uses SDPA), use_cache=True, tried as is and with the forward
under torch.compile over a static cache (transformers' recipe for compiled generation; --compile auto keeps the faster,
on / off runs one), sampling at temperature 1 (top_k=0, top_p=1.0: no truncation, like ours), exactly
--new tokens per sequence (min_new_tokens = max_new_tokens, EOS never stops it), B prompts of P random tokens
(no padding), torch.set_num_threads(2) (--threads); run.sh sets the docs/performance.md environment (OPENBLAS_CORETYPE,
OMP_WAIT_POLICY=PASSIVE, OPENBLAS_THREAD_TIMEOUT, MALLOC_*). Median over --steps runs after --warmup runs.

  baseline_hf.py --model DIR --batch B [--prompt P] [--new T] [--steps K] [--warmup W] [--attn sdpa|eager]
                 [--compile auto|on|off]
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
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    ap.add_argument("--compile", default="auto", choices=["auto", "on", "off"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"baseline: torch {torch.__version__}, transformers {transformers.__version__}, threads "
          f"{torch.get_num_threads()}, fp32 {a.attn} attention, generate(do_sample=True, use_cache=True), "
          f"torch.compile {a.compile}")
    best = None
    for mode in {"auto": ["eager-mode", "compiled"], "on": ["compiled"], "off": ["eager-mode"]}[a.compile]:
        t0 = time.perf_counter()
        times = run(a, mode)
        if times is None:
            continue
        med = statistics.median(times)
        print(f"baseline [{mode}]: batch {a.batch}, prompt {a.prompt}, {a.batch * a.new} new tokens per run, median "
              f"{a.batch * a.new / med:.1f} tok/s (min {a.batch * a.new / max(times):.1f}, max "
              f"{a.batch * a.new / min(times):.1f}; this mode took {time.perf_counter() - t0:.1f} s, compile included)")
        if best is None or med < best[1]:
            best = (mode, med)
    print(f"baseline: figure from [{best[0]}]")
    print(f"BASE_GEN_TOK_S={a.batch * a.new / best[1]:.1f}")


def run(a, mode):
    """Timed generate() runs in one mode, or None when the mode fails (reported; the other one still counts)."""
    try:
        model = Qwen2ForCausalLM.from_pretrained(a.model, attn_implementation=a.attn).float().eval()
        if mode == "compiled":
            model.generation_config.cache_implementation = "static"
            model.forward = torch.compile(model.forward)
        V = model.config.vocab_size
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(0, V, (a.batch, a.prompt), generator=g)
        mask = torch.ones_like(ids)
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
        return times
    except Exception as e:
        print(f"baseline [{mode}]: failed: {type(e).__name__}: {str(e)[:300]}")
        return None


if __name__ == "__main__":
    main()
