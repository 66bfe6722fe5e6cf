#!/usr/bin/env python3
"""Writes the tokenize benchmark corpus: one JSONL {"text"} line per GSM8K question, GSM8K answer, MATH-500
problem and MATH-500 solution (data/gsm8k-train.jsonl, data/gsm8k-test.jsonl, data/math500-test.jsonl)."""
import json
import os
import sys

root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
n = nbytes = 0
with open(sys.argv[1], "w", encoding="utf-8") as out:
    for name in ("gsm8k-train.jsonl", "gsm8k-test.jsonl", "math500-test.jsonl"):
        with open(os.path.join(root, "data", name), encoding="utf-8") as f:
            for line in f:
                ex = json.loads(line)["extra_info"]
                for t in (ex["raw_problem"], ex["solution"]):
                    out.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
                    n += 1
                    nbytes += len(t.encode("utf-8"))
print(f"corpus: {n} texts, {nbytes / 1e6:.2f} MB (GSM8K train+test questions and answers, MATH-500 problems and solutions)")
