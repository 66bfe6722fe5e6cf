#!/usr/bin/env python3
"""tests/reference/check_hf_checkpoint.py: checks that a checkpoint dapo wrote loads in Hugging Face transformers
unchanged and gives the same per-token log-probs as dapo's own forward (build/bin/dapo-logprobs). Used on the
final checkpoint of a run (issue 9); not part of `make test` (it needs pip's torch and transformers).

    python3 tests/reference/check_hf_checkpoint.py runs/default/checkpoints/global_step_N/actor/huggingface \
        [--tokenizer data/tokenizers/tiny] [--build build]

Prints the max |difference| of the log-probs over a few prompts and exits 0 when it is <= 1e-4.
"""
import argparse
import json
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--tokenizer", default=None, help="tokenizer dir when the checkpoint has none")
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok_dir = a.tokenizer or a.model_dir
    if not os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        sys.exit(f"no tokenizer.json in {tok_dir}: checkpoints hold only config.json and weights; "
                 "pass --tokenizer (data/tokenizers/tiny for the default run)")
    tok = AutoTokenizer.from_pretrained(tok_dir)
    model = AutoModelForCausalLM.from_pretrained(a.model_dir, torch_dtype=torch.float32)
    model.eval()
    texts = ["Tom has 12 apples. He buys 30 more. He gives away 5. How many apples does Tom have now?",
             "12+30=42. 42-5=37.\nAnswer: 37", "A bus carries 7 people."]
    lines, ref = [], {}
    for i, t in enumerate(texts):
        ids = tok(t)["input_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float()
        lp = torch.log_softmax(logits, dim=-1)
        ref[i] = [lp[j, ids[j + 1]].item() for j in range(len(ids) - 1)]
        lines.append(json.dumps({"id": i, "input_ids": ids, "start": 1}))
    cmd = [os.path.join(a.build, "bin", "dapo-logprobs"), "--model", a.model_dir]
    out = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"dapo-logprobs failed: {out.stderr.strip()[-500:]}")
    worst = 0.0
    for line in out.stdout.splitlines():
        r = json.loads(line)
        ours = r["logprobs"]
        theirs = ref[r["id"]]
        if len(ours) != len(theirs):
            sys.exit(f"prompt {r['id']}: {len(ours)} log-probs from dapo, {len(theirs)} from transformers")
        worst = max(worst, max(abs(x - y) for x, y in zip(ours, theirs)))
    print(f"{type(model).__name__} from {a.model_dir}: loaded by transformers; "
          f"max |logprob dapo - transformers| = {worst:.2e} over {sum(len(v) for v in ref.values())} tokens")
    sys.exit(0 if worst <= 1e-4 else 1)


if __name__ == "__main__":
    main()
