#!/usr/bin/env python3
"""bench/gpu/baseline_torch.py: the PyTorch baseline of bench/gpu_check.sh, on the same GPU in the same run, for the
same Qwen2.5-0.5B-shaped model with random weights:
  train : what a user would write — fp32 parameters, torch.autocast(bfloat16), fused AdamW, a [8, 1024] batch
          (the same 8192 tokens per step as ours), cross-entropy on the next token; median of 4 steps after warm-up.
  decode: the model in bf16, 64 prompts of 128 random tokens, 128 new tokens sampled at temperature 1 with a KV cache;
          decode tokens/s excludes the prefill (timed separately).
The model is transformers' Qwen2ForCausalLM (sdpa attention, model.generate) when transformers imports; else a plain
PyTorch Qwen2 (below: RMSNorm, RoPE, GQA through F.scaled_dot_product_attention, SwiGLU, tied embeddings) with its
own KV-cache sampling loop — the GPU host of the check may have torch without transformers. "impl" in the output
says which ran. Prints one line: BASEJSON {...}. --tiny / --device cpu make a seconds-long smoke run of this script;
--plain forces the plain model."""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F

SHAPE = dict(vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
             intermediate_size=4864)
TINY = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128)


class Rms(torch.nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.w, self.eps = torch.nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        v = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(v + self.eps)).to(x.dtype) * self.w


def rope(x, pos, theta=1e6):
    """x: [B, H, T, D]; pos: [T] positions (Qwen2's rotate-half RoPE)."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = pos.float()[:, None] * inv[None, :]
    cos, sin = torch.cat([ang, ang], -1).cos().to(x.dtype), torch.cat([ang, ang], -1).sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Layer(torch.nn.Module):
    def __init__(self, s):
        super().__init__()
        h, nh, kv = s["hidden_size"], s["num_attention_heads"], s["num_key_value_heads"]
        self.nh, self.kv, self.hd = nh, kv, h // nh
        self.q = torch.nn.Linear(h, nh * self.hd)
        self.k = torch.nn.Linear(h, kv * self.hd)
        self.v = torch.nn.Linear(h, kv * self.hd)
        self.o = torch.nn.Linear(nh * self.hd, h, bias=False)
        self.gate = torch.nn.Linear(h, s["intermediate_size"], bias=False)
        self.up = torch.nn.Linear(h, s["intermediate_size"], bias=False)
        self.down = torch.nn.Linear(s["intermediate_size"], h, bias=False)
        self.n1, self.n2 = Rms(h), Rms(h)

    def forward(self, x, pos, cache=None):
        B, T, _ = x.shape
        a = self.n1(x)
        q = self.q(a).view(B, T, self.nh, self.hd).transpose(1, 2)
        k = self.k(a).view(B, T, self.kv, self.hd).transpose(1, 2)
        v = self.v(a).view(B, T, self.kv, self.hd).transpose(1, 2)
        q, k = rope(q, pos), rope(k, pos)
        if cache is not None:
            if cache.get("k") is not None:
                k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
            cache["k"], cache["v"] = k, v
        rep = self.nh // self.kv
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1)
        x = x + self.o(y.transpose(1, 2).reshape(B, T, -1))
        b = self.n2(x)
        return x + self.down(F.silu(self.gate(b)) * self.up(b))


class PlainQwen2(torch.nn.Module):
    def __init__(self, s):
        super().__init__()
        self.emb = torch.nn.Embedding(s["vocab_size"], s["hidden_size"])
        self.layers = torch.nn.ModuleList(Layer(s) for _ in range(s["num_hidden_layers"]))
        self.norm = Rms(s["hidden_size"])

    def forward(self, ids, start=0, caches=None):
        x = self.emb(ids)
        pos = torch.arange(start, start + ids.shape[1], device=ids.device)
        for i, layer in enumerate(self.layers):
            x = layer(x, pos, caches[i] if caches is not None else None)
        return self.norm(x) @ self.emb.weight.t()          # tied lm_head

    def generate(self, prompts, new):
        caches = [dict() for _ in self.layers]
        logits = self(prompts, 0, caches)[:, -1]
        out, n = [prompts], prompts.shape[1]
        for t in range(new):
            nxt = torch.multinomial(F.softmax(logits.float(), -1), 1)
            out.append(nxt)
            if t + 1 < new:
                logits = self(nxt, n + t, caches)[:, -1]
        return torch.cat(out, 1)


def make_model(shape, dev, plain):
    if not plain:
        try:
            from transformers import Qwen2Config, Qwen2ForCausalLM
            cfg = Qwen2Config(**shape, max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0,
                              tie_word_embeddings=True, use_sliding_window=False)
            return Qwen2ForCausalLM._from_config(cfg, attn_implementation="sdpa").to(dev), "transformers"
        except ImportError:
            pass
    return PlainQwen2(shape).to(dev), "plain-torch"


def loss_of(model, impl, ids):
    if impl == "transformers":
        return model(input_ids=ids, labels=ids).loss
    logits = model(ids)
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1))


def generate(model, impl, prompts, new):
    if impl == "transformers":
        kw = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, pad_token_id=0, eos_token_id=None)
        return model.generate(prompts, max_new_tokens=new, min_new_tokens=new, **kw)
    return model.generate(prompts, new)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--plain", action="store_true")
    a = ap.parse_args()
    dev = torch.device(a.device)
    shape = TINY if a.tiny else SHAPE
    B, T, G, P, NEW, STEPS = (2, 32, 4, 8, 8, 2) if a.tiny else (8, 1024, 64, 128, 128, 4)
    torch.manual_seed(0)
    model, impl = make_model(shape, dev, a.plain)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    # ---- train
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01, fused=dev.type == "cuda")
    ids = torch.randint(0, shape["vocab_size"], (B, T), device=dev)
    times = []
    for k in range(STEPS + 1):
        sync()
        t0 = time.perf_counter()
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            loss = loss_of(model, impl, ids)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        if k:
            times.append(time.perf_counter() - t0)
    assert math.isfinite(loss.item())
    step = statistics.median(times)
    del opt
    model.zero_grad(set_to_none=True)
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    # ---- decode
    model = model.to(torch.bfloat16).eval()
    prompts = torch.randint(0, shape["vocab_size"], (G, P), device=dev)
    with torch.no_grad():
        generate(model, impl, prompts, 2)                                   # warm-up
        sync()
        t0 = time.perf_counter()
        generate(model, impl, prompts, 1)
        sync()
        pre = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = generate(model, impl, prompts, NEW)
        sync()
        tot = time.perf_counter() - t0
    assert out.shape[1] == P + NEW, out.shape
    res = dict(train_tokens_per_s=B * T / step, train_step_s=step, decode_tokens_per_s=G * (NEW - 1) / max(tot - pre, 1e-9),
               prefill_s=pre, generate_s=tot, torch=torch.__version__, impl=impl,
               device=str(torch.cuda.get_device_name(0)) if dev.type == "cuda" else "cpu")
    print("BASEJSON " + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
