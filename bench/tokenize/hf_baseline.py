#!/usr/bin/env python3
"""HF tokenizers baseline for bench/tokenize, one thread (TOKENIZERS_PARALLELISM=false, RAYON_NUM_THREADS=1):
(a) Tokenizer.encode(text, add_special_tokens=False) one text at a time, (b) encode_batch(texts). Same corpus
and reps as ours; the first rep of (a) starts from a freshly loaded tokenizer (empty word cache), as ours does.
Prints both medians and, as baseline_mbps, the faster one."""
import json
import os
import statistics
import sys
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"
import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

tok_dir, corpus, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
texts = [json.loads(l)["text"] for l in open(corpus, encoding="utf-8")]
nbytes = sum(len(t.encode("utf-8")) for t in texts)
tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
print(f"baseline: HF tokenizers {tokenizers.__version__} (Python), {len(texts)} texts, {nbytes / 1e6:.2f} MB, {reps} reps, "
      f"one thread, encode one text at a time")
mbps = []
for r in range(reps):
    t0 = time.perf_counter()
    ntok = 0
    for t in texts:
        ntok += len(tok.encode(t, add_special_tokens=False).ids)
    dt = time.perf_counter() - t0
    mbps.append(nbytes / 1e6 / dt)
    print(f"baseline rep {r}: {dt:.3f} s, {mbps[-1]:.2f} MB/s, {ntok} tokens{' (cold cache)' if r == 0 else ''}")
loop = statistics.median(mbps)
# encode_batch with one thread, same reps: the baseline is whichever of the two is faster (said below).
bmbps = []
for r in range(reps):
    t0 = time.perf_counter()
    enc = tok.encode_batch(texts, add_special_tokens=False)
    dt = time.perf_counter() - t0
    bmbps.append(nbytes / 1e6 / dt)
    print(f"baseline encode_batch rep {r}: {dt:.3f} s, {bmbps[-1]:.2f} MB/s, {sum(len(e.ids) for e in enc)} tokens")
batch = statistics.median(bmbps)
best = "encode one text at a time" if loop >= batch else "encode_batch (one thread)"
print(f"baseline medians: encode loop {loop:.3f} MB/s, encode_batch {batch:.3f} MB/s -> baseline = {best}")
print(f"baseline_mbps={max(loop, batch):.3f} tokens={ntok}")
