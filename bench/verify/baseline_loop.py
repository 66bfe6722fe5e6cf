#!/usr/bin/env python3
"""bench/verify/baseline_loop.py REWARD.py CASES.jsonl [--limit N] [--min-seconds S]: the Python reward path's
baseline — what verl's naive reward manager does: one process calling the reward file's compute_score(data_source,
solution_str, ground_truth, extra_info) item after item, in a plain loop. Median of timed passes over the cases;
prints BASE_ITEMS_PER_S=<v>."""
import argparse
import importlib.util
import json
import statistics
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reward")
    ap.add_argument("cases")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--min-seconds", type=float, default=3.0)
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("reward", a.reward)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn = mod.compute_score
    cases = [json.loads(l) for l in open(a.cases, encoding="utf-8") if l.strip()]
    if a.limit:
        cases = cases[:a.limit]
    items = [("math_dapo", c["solution"], c["ground_truth"], {"response_length": 0}) for c in cases]  # as the pool sends
    passes, total = [], 0.0
    while len(passes) < 3 or total < a.min_seconds:
        t0 = time.perf_counter()
        for it in items:
            fn(*it)
        dt = time.perf_counter() - t0
        passes.append(dt)
        total += dt
    med = statistics.median(passes)
    print(f"baseline loop: {len(items)} items, {len(passes)} passes, median {med:.3f} s")
    print(f"BASE_ITEMS_PER_S={len(items) / med:.1f}")


if __name__ == "__main__":
    main()
