#!/usr/bin/env python3
"""Baseline for bench/verify: verl's own math_dapo.compute_score, single thread, on the same cases.

Loads ONLY the file verl/utils/reward_score/math_dapo.py from a verl installed with --no-deps (importing
the verl package would pull torch, ray, ...). verl 0.8.0's copy has exactly the DAPO eval/math_dapo.py
semantics the cases were made with (default and strict mode), so the check line must read N/N.
JSON parsing is excluded: every case is parsed first; then whole passes over the corpus are timed with
time.perf_counter and the median pass gives cases/s (printed as BASE_CASES_PER_S=<v>).

usage: baseline_verl.py --verl-dir DIR CASES.jsonl [--min-seconds S]
"""
import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases")
    ap.add_argument("--verl-dir", required=True, help="a --target directory holding the verl package")
    ap.add_argument("--min-seconds", type=float, default=3.0)
    a = ap.parse_args()

    path = os.path.join(a.verl_dir, "verl", "utils", "reward_score", "math_dapo.py")
    spec = importlib.util.spec_from_file_location("verl_math_dapo", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    compute_score = mod.compute_score
    version = "?"
    for d in os.listdir(a.verl_dir):
        if d.startswith("verl-") and d.endswith(".dist-info"):
            version = d[len("verl-"):-len(".dist-info")]
    print(f"baseline: verl {version} math_dapo.compute_score ({path}), "
          f"{platform.python_implementation()} {platform.python_version()}, one thread")

    with open(a.cases, encoding="utf-8") as f:
        cases = [json.loads(line) for line in f if line.strip()]
    items = [(c["solution"], c["ground_truth"], bool(c["strict_box"])) for c in cases]

    match = 0
    for c, (s, g, b) in zip(cases, items):
        r = compute_score(s, g, b)
        match += (r["score"] == c["score"] and bool(r["acc"]) == c["acc"] and r["pred"] == c["pred"])
    print(f"check: {match}/{len(cases)} match the reference outputs")

    passes, total = [], 0.0
    cpu0 = time.thread_time()
    while len(passes) < 3 or total < a.min_seconds:
        t0 = time.perf_counter()
        for s, g, b in items:
            compute_score(s, g, b)
        dt = time.perf_counter() - t0
        passes.append(dt)
        total += dt
    cpu = time.thread_time() - cpu0
    med = statistics.median(passes)
    cps = len(items) / med
    print(f"baseline: {len(passes)} passes, median pass {med * 1e3:.1f} ms -> {cps:.0f} cases/s on one core "
          f"({med * 1e6 / len(items):.2f} us/case average); by thread CPU time: "
          f"{len(items) * len(passes) / cpu:.0f} cases/s")
    lat = []
    for s, g, b in items:
        t0 = time.perf_counter()
        compute_score(s, g, b)
        lat.append((time.perf_counter() - t0) * 1e6)
    lat.sort()
    print(f"baseline per case: median {lat[len(lat) // 2]:.2f} us, p99 {lat[int(len(lat) * 0.99)]:.2f} us, "
          f"max {lat[-1]:.2f} us")
    print(f"BASE_CASES_PER_S={cps:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
