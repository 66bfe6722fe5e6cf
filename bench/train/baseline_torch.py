#!/usr/bin/env python3
"""bench/train baseline: transformers Qwen2ForCausalLM + torch.optim.AdamW, fp32, eager, tuned as
/work/shared/PERF.md says (torch.set_num_threads(2); run.sh sets OPENBLAS_CORETYPE, OMP_WAIT_POLICY=PASSIVE,
OPENBLAS_THREAD_TIMEOUT=4 and the MALLOC_* variables). Same work per step as ours: logits / T, token
log-probs and entropies (verl's logprobs_from_logits / entropy_from_logits), loss = sum w*logp + sum u*H,
backward, clip_grad_norm_(1.0), AdamW step. Prefill: forward only under no_grad.

  baseline_torch.py --make-model DIR --config tiny|small     writes the random model both sides load
  baseline_torch.py --model DIR --batch B --seq T [--steps K] [--warmup W] [--prefill-only]
"""
import argparse
import statistics
import time

import torch
import transformers
from transformers import Qwen2Config, Qwen2ForCausalLM

CONFIGS = {
    "tiny": dict(vocab_size=512, hidden_size=256, num_hidden_layers=4, num_attention_heads=8,
                 num_key_value_heads=2, intermediate_size=704),
    "small": dict(vocab_size=4096, hidden_size=512, num_hidden_layers=8, num_attention_heads=8,
                  num_key_value_heads=2, intermediate_size=1408),
}


def make_model(d, name):
    torch.manual_seed(0)
    cfg = Qwen2Config(**CONFIGS[name], tie_word_embeddings=False, max_position_embeddings=4096,
                      rope_theta=10000.0, attn_implementation="eager")
    Qwen2ForCausalLM(cfg).float().save_pretrained(d, safe_serialization=True)


def blas_info():
    show = torch.__config__.show()
    keep = [l.strip() for l in show.splitlines() if any(k in l for k in ("BLAS", "MKL", "LAPACK", "oneDNN", "OpenMP"))]
    return "; ".join(keep)[:400]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--make-model")
    ap.add_argument("--config", default="small")
    ap.add_argument("--model")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--prefill-only", action="store_true", help="skip the training steps (prefill A/B runs)")
    a = ap.parse_args()
    torch.set_num_threads(2)
    if a.make_model:
        make_model(a.make_model, a.config)
        return
    print(f"baseline: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"threads {torch.get_num_threads()}, fp32 eager attention")
    print(f"baseline: torch config: {blas_info()}")
    model = Qwen2ForCausalLM.from_pretrained(a.model, attn_implementation="eager").float()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    V = model.config.vocab_size
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, V, (a.batch, a.seq), generator=g)
    N = a.batch * a.seq
    w = torch.where(torch.arange(N) % 3 == 0, 1.0, -1.0).reshape(a.batch, a.seq)[:, :-1] / N
    u = torch.full((a.batch, a.seq), -0.01 / N)
    times, tf, tb, to = [], [], [], []
    for it in range(0 if a.prefill_only else a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(input_ids=ids).logits / 1.0
        lsm = torch.log_softmax(logits, dim=-1)
        logp = lsm[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
        ent = torch.logsumexp(logits, -1) - (torch.softmax(logits, -1) * logits).sum(-1)
        loss = (w * logp).sum() + (u * ent).sum()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        t3 = time.perf_counter()
        if it >= a.warmup:
            times.append(t3 - t0); tf.append(t1 - t0); tb.append(t2 - t1); to.append(t3 - t2)
    model.eval()
    pre, pre_cpu = [], []
    with torch.no_grad():
        for it in range(a.warmup + a.steps):
            t0, c0 = time.perf_counter(), time.process_time()
            model(input_ids=ids).logits
            if it >= a.warmup:
                pre.append(time.perf_counter() - t0)
                pre_cpu.append(time.process_time() - c0)
    if a.prefill_only:
        times, tf, tb, to = [0.0] * a.steps, [0.0], [0.0], [0.0]
    mt, mp = statistics.median(times), statistics.median(pre)
    print(f"baseline: train step median {mt:.3f} s (forward {statistics.median(tf):.3f}, backward "
          f"{statistics.median(tb):.3f}, clip+adamw {statistics.median(to):.3f})")
    print(f"baseline: prefill median {mp:.3f} s")
    for a_, b_, c_ in zip(times, pre, pre_cpu):
        print(f"TRAIN_STEP_S={a_:.6f}\nPREFILL_STEP_S={b_:.6f}\nPREFILL_CPU_S={c_:.6f}")
    print(f"BASE_TRAIN_TOK_S={N / mt if mt else 0:.1f}")
    print(f"BASE_PREFILL_TOK_S={N / mp:.1f}")


if __name__ == "__main__":
    main()
