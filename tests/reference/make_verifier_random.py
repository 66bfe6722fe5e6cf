#!/usr/bin/env python3
"""Writes tests/data/verifier/random_cases.jsonl.zst: 8,000 randomized verifier cases (solutions and ground
truths assembled from the fragments each math_dapo rule reacts to: Answer-keyword variants, colons, the 29
whitespace code points, $, \\boxed{, \\text{, frac/sqrt, commas, digits of other scripts, units, NUL, windows
of filler around them ...) with the outputs of the reference, verl 0.8.0's
verl/utils/reward_score/math_dapo.py `compute_score` (identical in both modes to DAPO's eval/math_dapo.py
at commit 33fe317, the source of tests/data/verifier/cases.jsonl.zst). Complements the given corpus with
inputs nobody tuned against; tests/unit/test_verifier_cases.c runs every one through the C library.

verl is installed with --no-deps into a private --target directory ($DAPO_VERL_MATH_DIR, default
~/.cache/dapo/verl-0.8.0-nodeps, outside the repository) and only math_dapo.py is imported. Needs the `zstd` command.
Deterministic: fixed seed. Run under CPython 3.11 (the corpus' interpreter)."""
import importlib.util
import json
import os
import random
import re
import subprocess
import sys

VERSION = "0.8.0"
N_CASES = 8000
SEED = 20261130

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out_path = os.path.join(root, "tests", "data", "verifier", "random_cases.jsonl.zst")
verl_dir = os.environ.get("DAPO_VERL_MATH_DIR", os.path.expanduser(f"~/.cache/dapo/verl-{VERSION}-nodeps"))
src = os.path.join(verl_dir, "verl", "utils", "reward_score", "math_dapo.py")
if not os.path.exists(src):
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", verl_dir,
                           f"verl=={VERSION}"])
spec = importlib.util.spec_from_file_location("verl_math_dapo", src)
md = importlib.util.module_from_spec(spec)
spec.loader.exec_module(md)

FRAGS = ["Answer", "answer", "ANSWER", "anſwer", "Answers", "nswer", ":", "：", ": ", "Answer: ", "Answer:",
         "Answer :", " ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u2028", "\u0085", "\u3000", "\u200b",
         "\u000b", "\x1c", "\x1f", "$", "$$", "\\$", "\\boxed{", "\\text{", "\\textbf{", "\\overline{", "\\mbox{",
         "{", "}", "}}", "=", "frac", "\\frac", "\\dfrac", "sqrt", "\\sqrt", "1", "2", "12", "0", ",", ", ",
         "1,234", ".", ".$", "a ", "an ", "a", "n", "mbox", "\\text{and}", ",\\text{and}", "\\text{m}", "cm",
         "gm", "km", "^\\circ", "^{\\circ}", "\\;", ",\\!", "{,}", '"', "\\dots", "\\ldots", "\\text{\ns}",
         "\\text{\n}", "\\text{}", "\\text{}^2", "\\text{s}", "\\text{.}", "x", "y", "é", "😀", "１", "２", "²",
         "①", "٣", "𝟏", "−", "-", "\\ ", "\\mathrm{th}", "units", "square", "ways", "sue", "\u0000", "\\left(",
         "\\right)", "\\pi", "(", ")", "[", "]", "**", "#### ", "\\%", "%", "e", "s", "w", "r"]
FILLER = ["x", "é", "😀", " ", "\n", "Answer: 9\n"]


def frags(rng, k):
    return "".join(rng.choice(FRAGS) for _ in range(k))


def main():
    rng = random.Random(SEED)
    lines = []
    for i in range(N_CASES):
        sol = frags(rng, rng.randint(0, 40))
        if rng.random() < 0.2:   # push things across the 300 / 100 code-point windows
            filler = "".join(rng.choice(FILLER) for _ in range(rng.randint(200, 400)))
            sol = filler + sol if rng.random() < 0.5 else sol + filler
        if rng.random() < 0.5:
            gt = frags(rng, rng.randint(0, 8))
        else:                    # a ground truth near the prediction, so that acc is often true
            mm = re.findall(r"(?i)Answer\s*:\s*([^\n]+)", sol[-300:])
            gt = mm[-1] if mm else frags(rng, 3)
            if rng.random() < 0.5:
                gt = md.normalize_final_answer(gt)
        strict = rng.random() < 0.25
        if strict and rng.random() < 0.5:
            box = md.last_boxed_only_string(sol[-100:])
            if box:
                gt = md.remove_boxed(box)
        r = md.compute_score(sol, gt, strict)
        lines.append(json.dumps({"id": f"rnd-{i:05d}", "solution": sol, "ground_truth": gt, "strict_box": strict,
                                 "score": r["score"], "acc": bool(r["acc"]), "pred": r["pred"]},
                                ensure_ascii=False, separators=(",", ":")))
    data = ("\n".join(lines) + "\n").encode("utf-8")
    subprocess.run(["zstd", "-19", "-q", "-f", "-o", out_path], input=data, check=True)
    n_acc = sum('"acc":true' in line for line in lines)
    print(f"wrote {out_path}: {len(lines)} cases ({n_acc} acc true), verl {VERSION} math_dapo, "
          f"python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
