#!/usr/bin/env python3
"""bench/gpu/baseline_torch.py: the PyTorch baseline of bench/gpu_check.sh, on the same GPU in the same run, for the
same Qwen2.5-0.5B-shaped model with random weights (transformers Qwen2ForCausalLM, sdpa attention):
  train : what a user would write — fp32 parameters, torch.autocast(bfloat16), fused AdamW, a [8, 1024] batch
          (the same 8192 tokens per step as ours), loss = model(input_ids, labels).loss; median of 4 steps after warm-up.
  decode: model.to(bfloat16).generate on 64 prompts of 128 random tokens, 128 new tokens (min_new_tokens forces
          the length), do_sample with temperature 1; decode tokens/s excludes the prefill (timed separately).
Prints one line: BASEJSON {...}. --tiny / --device cpu make a seconds-long smoke run of this script itself."""
import argparse
import json
import statistics
import time

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    dev = torch.device(a.device)
    if a.tiny:
        shape = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     intermediate_size=128)
        B, T, G, P, NEW, STEPS = 2, 32, 4, 8, 8, 2
    else:
        shape = dict(vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                     num_key_value_heads=2, intermediate_size=4864)
        B, T, G, P, NEW, STEPS = 8, 1024, 64, 128, 128, 4
    cfg = Qwen2Config(**shape, max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0,
                      tie_word_embeddings=True, use_sliding_window=False)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM._from_config(cfg, attn_implementation="sdpa").to(dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    # ---- train
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01, fused=dev.type == "cuda")
    ids = torch.randint(0, cfg.vocab_size, (B, T), device=dev)
    times = []
    for k in range(STEPS + 1):
        sync()
        t0 = time.perf_counter()
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        if k:
            times.append(time.perf_counter() - t0)
    step = statistics.median(times)
    del opt
    model.zero_grad(set_to_none=True)
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    # ---- decode
    model = model.to(torch.bfloat16).eval()
    prompts = torch.randint(0, cfg.vocab_size, (G, P), device=dev)
    kw = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, pad_token_id=0, eos_token_id=None)
    with torch.no_grad():
        model.generate(prompts, max_new_tokens=2, min_new_tokens=2, **kw)   # warm-up
        sync()
        t0 = time.perf_counter()
        model.generate(prompts, max_new_tokens=1, min_new_tokens=1, **kw)
        sync()
        pre = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = model.generate(prompts, max_new_tokens=NEW, min_new_tokens=NEW, **kw)
        sync()
        tot = time.perf_counter() - t0
    assert out.shape[1] == P + NEW, out.shape
    res = dict(train_tokens_per_s=B * T / step, train_step_s=step, decode_tokens_per_s=G * (NEW - 1) / max(tot - pre, 1e-9),
               prefill_s=pre, generate_s=tot, torch=torch.__version__, device=str(torch.cuda.get_device_name(0)) if dev.type == "cuda" else "cpu")
    print("BASEJSON " + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
