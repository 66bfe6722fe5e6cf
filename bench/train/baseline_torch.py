#!/usr/bin/env python3
"""bench/train baseline: transformers Qwen2ForCausalLM + torch.optim.AdamW, fp32, SDPA attention (--attn; issue 23:
every PyTorch baseline uses SDPA), once as is and once under torch.compile (--compile auto: both, the faster one is
the figure; on / off: only that one), tuned as docs/performance.md says (torch.set_num_threads(2); run.sh sets OPENBLAS_CORETYPE, OMP_WAIT_POLICY=PASSIVE,
OPENBLAS_THREAD_TIMEOUT=4 and the MALLOC_* variables). Same work per step as ours: logits / T, token
log-probs and entropies (verl's logprobs_from_logits / entropy_from_logits), loss = sum w*logp + sum u*H,
backward, clip_grad_norm_(1.0), AdamW step. Prefill: forward only under no_grad.

  baseline_torch.py --make-model DIR --config tiny|small     writes the random model both sides load
  baseline_torch.py --model DIR --batch B --seq T [--steps K] [--warmup W] [--prefill-only] [--attn sdpa|eager]
                    [--compile auto|on|off] [--dtype fp32|autocast-bf16|bf16]
--dtype (issue 44, the bf16 baselines): fp32 (the default); autocast-bf16: fp32 weights and AdamW, the forward and
loss under torch.autocast("cpu", bfloat16) (mixed precision as FSDP/verl run it); bf16: the model itself in bfloat16
(pure bf16, AdamW on bf16 parameters). On CPUs with AVX512-BF16 or AMX, PyTorch runs bf16 matmuls through oneDNN.
Train and prefill are each timed per mode; the faster mode of each is printed as TRAIN_STEP_S / PREFILL_STEP_S (the
compile time itself falls in the warmup steps and is printed apart).
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
                      rope_theta=10000.0)
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
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    ap.add_argument("--compile", default="auto", choices=["auto", "on", "off"])
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "autocast-bf16", "bf16"])
    a = ap.parse_args()
    torch.set_num_threads(2)
    if a.make_model:
        make_model(a.make_model, a.config)
        return
    print(f"baseline: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"threads {torch.get_num_threads()}, {a.dtype} {a.attn} attention, torch.compile {a.compile}")
    print(f"baseline: torch config: {blas_info()}")
    model = Qwen2ForCausalLM.from_pretrained(a.model, attn_implementation=a.attn).float()
    if a.dtype == "bf16":
        model = model.to(torch.bfloat16)
    V = model.config.vocab_size
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, V, (a.batch, a.seq), generator=g)
    N = a.batch * a.seq
    modes = {"auto": ["eager-mode", "compiled"], "on": ["compiled"], "off": ["eager-mode"]}[a.compile]
    best = {}
    for mode in modes:
        fwd = torch.compile(model) if mode == "compiled" else model
        t0 = time.perf_counter()
        r = run(a, model, fwd, ids, N)
        if r is None:
            continue
        print(f"baseline [{mode}]: train step median {statistics.median(r[0]) if r[0] else 0:.3f} s, prefill median "
              f"{statistics.median(r[1][0]):.3f} s (this mode took {time.perf_counter() - t0:.1f} s, compile included)")
        for k, v in (("train", r[0]), ("prefill", r[1])):
            med = statistics.median(v[0] if k == "prefill" else v) if (v[0] if k == "prefill" else v) else None
            if med is not None and (k not in best or med < best[k][2]):
                best[k] = (mode, v, med)
    times = best["train"][1] if "train" in best else [0.0] * a.steps
    pre, pre_cpu = best["prefill"][1]
    print(f"baseline: figures from train [{best['train'][0] if 'train' in best else '-'}], "
          f"prefill [{best['prefill'][0]}]")
    mt, mp = statistics.median(times), statistics.median(pre)
    for a_, b_, c_ in zip(times, pre, pre_cpu):
        print(f"TRAIN_STEP_S={a_:.6f}\nPREFILL_STEP_S={b_:.6f}\nPREFILL_CPU_S={c_:.6f}")
    print(f"BASE_TRAIN_TOK_S={N / mt if mt else 0:.1f}")
    print(f"BASE_PREFILL_TOK_S={N / mp:.1f}")


def run(a, model, fwd, ids, N):
    """Timed train steps and prefill passes with forward fwd (model itself or its torch.compile); None when this
    mode fails (a compile error is reported, the other mode still counts)."""
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
        w = torch.where(torch.arange(N) % 3 == 0, 1.0, -1.0).reshape(a.batch, a.seq)[:, :-1] / N
        u = torch.full((a.batch, a.seq), -0.01 / N)
        times, pre, pre_cpu = [], [], []
        model.train()
        amp = torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "autocast-bf16")
        for it in range(0 if a.prefill_only else a.warmup + a.steps):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            with amp:
                logits = fwd(input_ids=ids).logits.float() / 1.0      # fp32 log-softmax, as verl
                lsm = torch.log_softmax(logits, dim=-1)
                logp = lsm[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
                ent = torch.logsumexp(logits, -1) - (torch.softmax(logits, -1) * logits).sum(-1)
                loss = (w * logp).sum() + (u * ent).sum()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if it >= a.warmup:
                times.append(time.perf_counter() - t0)
        model.eval()
        with torch.no_grad(), amp:
            for it in range(a.warmup + a.steps):
                t0, c0 = time.perf_counter(), time.process_time()
                fwd(input_ids=ids).logits
                if it >= a.warmup:
                    pre.append(time.perf_counter() - t0)
                    pre_cpu.append(time.process_time() - c0)
        return times, (pre, pre_cpu)
    except Exception as e:                     # torch.compile needs a C++ toolchain; report and go on
        print(f"baseline: this mode failed: {type(e).__name__}: {str(e)[:300]}")
        return None


if __name__ == "__main__":
    main()
