#!/usr/bin/env python3
"""Model-core fixtures (issue 4): tiny random Qwen2 / Qwen3 / Llama checkpoints and what transformers
computes on them, for tests/unit/test_model.c.

For each model in MODELS it writes, under tests/data/model/:
  <name>/config.json, generation_config.json, model.safetensors   (HF format, fp32, save_pretrained)
  <name>.fixture.safetensors  with
    tokens, targets, cu_seqlens (I32)      a packed batch of 3 sequences (targets = next token, -1 at ends)
    w, u                                   fixed random loss weights (token-mean scale: randn / N)
    logp, entropy                          log softmax(logits / T)[target] and entropy, per position
    grad.<hf name>                         d/dparam of  sum_t w_t logp_t + sum_t u_t entropy_t
    adamw.<hf name>                        params after 2 torch.optim.AdamW steps fed grad.* each time
    metadata: temperature, loss, grad_norm, lr, weight_decay, steps
The reference runs in float64 (model.double(), eager attention, each sequence on its own: no padding), so
the C fp32 results are compared with an exact answer; AdamW runs in fp32 as torch does it.

Then the round-trip check (not part of make test): the C tool dapo-logprobs loads one model, saves it
(fp32 and bf16) to a temp dir; transformers must load those checkpoints unchanged and give the same
log-probs as dapo-logprobs prints for them. Run with `make fixtures` (or python3 this file).
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "model")
TEMPERATURE = 0.7
LR, WD, STEPS = 1e-2, 0.1, 2

MODELS = [
    # name, class, config kwargs
    ("qwen2_gqa", Qwen2ForCausalLM, Qwen2Config, dict(vocab_size=96, hidden_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, intermediate_size=80, tie_word_embeddings=False,
        rope_theta=10000.0, rms_norm_eps=1e-6, max_position_embeddings=128)),
    ("qwen2_tied", Qwen2ForCausalLM, Qwen2Config, dict(vocab_size=101, hidden_size=36, num_hidden_layers=2,
        num_attention_heads=3, num_key_value_heads=3, intermediate_size=70, tie_word_embeddings=True,
        rope_theta=1000000.0, rms_norm_eps=1e-5, max_position_embeddings=128)),
    ("qwen3", Qwen3ForCausalLM, Qwen3Config, dict(vocab_size=100, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=64,
        tie_word_embeddings=False, rope_theta=10000.0, rms_norm_eps=1e-6, max_position_embeddings=128)),
    ("llama3", LlamaForCausalLM, LlamaConfig, dict(vocab_size=90, hidden_size=40, num_hidden_layers=2,
        num_attention_heads=5, num_key_value_heads=1, intermediate_size=56, tie_word_embeddings=False,
        rms_norm_eps=1e-5, max_position_embeddings=128,
        rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                          original_max_position_embeddings=8, rope_theta=500000.0), rope_theta=500000.0)),
]
SEQ_LENS = [7, 13, 5]


def build(name, cls, cfg_cls, kw, seed):
    torch.manual_seed(seed)
    cfg = cfg_cls(**kw, bos_token_id=1, eos_token_id=2, attn_implementation="eager")
    model = cls(cfg).float()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.08 * torch.randn_like(p))
    model.eval()
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": [2, 5], "do_sample": True}, f, indent=2)
    return model


def hf_names(model):
    names = [n for n, _ in model.named_parameters()]
    return names


def ref_forward(model, seqs, targets, temperature):
    """float64 per-sequence forward: returns logp, entropy as flat tensors (packed order)."""
    lps, ents = [], []
    for s, t in zip(seqs, targets):
        out = model(input_ids=s[None, :])
        z = out.logits[0].double() / temperature
        lsm = torch.log_softmax(z, dim=-1)
        ent = torch.logsumexp(z, dim=-1) - (torch.softmax(z, dim=-1) * z).sum(-1)
        tt = t.clamp(min=0)
        lp = lsm.gather(-1, tt[:, None])[:, 0] * (t >= 0)
        lps.append(lp)
        ents.append(ent)
    return torch.cat(lps), torch.cat(ents)


def make_one(idx, name, cls, cfg_cls, kw):
    model = build(name, cls, cfg_cls, kw, 1000 + idx)
    V = kw["vocab_size"]
    g = torch.Generator().manual_seed(77 + idx)
    seqs = [torch.randint(0, V, (n,), generator=g) for n in SEQ_LENS]
    targets = [torch.cat([s[1:], torch.tensor([-1])]) for s in seqs]
    tokens = torch.cat(seqs).to(torch.int32)
    tgt = torch.cat(targets).to(torch.int32)
    cu = torch.tensor(np.cumsum([0] + SEQ_LENS), dtype=torch.int32)
    N = tokens.numel()
    # per-token weights at the scale of a token-mean loss (DAPO: d loss / d logp = -A * ratio / n_tokens)
    w = torch.randn(N, generator=g, dtype=torch.float64) * (tgt >= 0) / N
    u = torch.randn(N, generator=g, dtype=torch.float64) * 0.5 / N

    m64 = model.double()
    m64.zero_grad()
    lp, ent = ref_forward(m64, seqs, targets, TEMPERATURE)
    loss = (w * lp).sum() + (u * ent).sum()
    loss.backward()
    names = hf_names(m64)
    params = dict(m64.named_parameters())
    tensors = {
        "tokens": tokens, "targets": tgt, "cu_seqlens": cu,
        "w": w.float(), "u": u.float(), "logp": lp.detach().float(), "entropy": ent.detach().float(),
    }
    grads32 = {}
    for n in names:
        grads32[n] = params[n].grad.detach().float().contiguous()
        tensors["grad." + n] = grads32[n]
    gnorm = float(torch.sqrt(sum((params[n].grad.detach() ** 2).sum() for n in names)))

    # AdamW in fp32 exactly as torch runs it, fed the fixture gradients (so the C test can feed the same)
    m32 = model.float()
    with torch.no_grad():
        opt = torch.optim.AdamW(m32.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=WD)
        pmap = dict(m32.named_parameters())
        for _ in range(STEPS):
            for n in names:
                pmap[n].grad = grads32[n].clone()
            opt.step()
        for n in names:
            tensors["adamw." + n] = pmap[n].detach().float().contiguous()
    meta = {"temperature": repr(TEMPERATURE), "loss": repr(float(loss)), "grad_norm": repr(gnorm),
            "lr": repr(LR), "weight_decay": repr(WD), "steps": str(STEPS)}
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(OUT, name + ".fixture.safetensors"),
              metadata=meta)
    print(f"  {name}: {sum(p.numel() for p in m32.parameters())} params, loss {float(loss):.6f}, "
          f"grad norm {gnorm:.6f}")


def find_tool():
    for b in (os.environ.get("BUILD", ""), "build-model", "build"):
        p = os.path.join(ROOT, b, "bin", "dapo-logprobs") if b else ""
        if p and os.access(p, os.X_OK):
            return p
    subprocess.run(["make", "-s", "-j2", "build/bin/dapo-logprobs"], cwd=ROOT, check=True)
    return os.path.join(ROOT, "build", "bin", "dapo-logprobs")


def roundtrip_check():
    """transformers must load what the C code saves, and agree with the C log-probs on it."""
    tool = find_tool()
    src = os.path.join(OUT, "qwen2_gqa")
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 96, (11,), generator=g).tolist()
    line = json.dumps({"id": "a", "input_ids": ids, "start": 1}) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        for dtype, tol in (("f32", 2e-5), ("bf16", 2e-5)):
            d = os.path.join(tmp, dtype)
            subprocess.run([tool, "--model", src, "--save", d, "--save-dtype", dtype], check=True,
                           input="", text=True, capture_output=True)
            out = subprocess.run([tool, "--model", d, "--temperature", "1.0"], input=line, text=True,
                                 capture_output=True, check=True).stdout
            ours = json.loads(out.splitlines()[0])
            model = Qwen2ForCausalLM.from_pretrained(d, attn_implementation="eager").float().eval()
            with torch.no_grad():
                z = model(input_ids=torch.tensor([ids])).logits[0].double()
            lsm = torch.log_softmax(z, -1)
            ref = [float(lsm[t - 1, ids[t]]) for t in range(1, len(ids))]
            diff = max(abs(a - b) for a, b in zip(ours["logprobs"], ref))
            print(f"  round trip ({dtype}): transformers loaded our checkpoint; max |logp diff| = {diff:.2e}")
            if not diff <= tol:
                sys.exit(f"round trip {dtype}: log-probs differ by {diff}")


def main():
    torch.set_num_threads(2)
    os.makedirs(OUT, exist_ok=True)
    for i, (name, cls, cfg_cls, kw) in enumerate(MODELS):
        make_one(i, name, cls, cfg_cls, kw)
    total = 0
    for dp, _, fs in os.walk(OUT):
        total += sum(os.path.getsize(os.path.join(dp, f)) for f in fs)
    print(f"  fixtures: {total / 1e6:.2f} MB under {OUT}")
    if os.environ.get("SKIP_ROUNDTRIP") != "1":
        roundtrip_check()


if __name__ == "__main__":
    main()
