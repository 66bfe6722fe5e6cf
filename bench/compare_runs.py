#!/usr/bin/env python3
"""bench/compare_runs.py RUN_A RUN_B: are two training runs bitwise the same?

Compares every metric of every line of RUN/checkpoints/metrics.jsonl except wall-clock ones (timing_s/*, perf/*),
and the final checkpoint's weights and optimizer state byte for byte (the highest global_step_N present in both).
Used for the "numbers do not move" check of a refactor: two 20-step runs of the default job with
actor_rollout_ref.rollout.batch_invariant=true and the same seed, one per commit. Exit 0 when equal, 1 when they differ, 2 on bad input (missing or unreadable files, no metric lines)."""
import filecmp
import json
import os
import re
import sys


class BadInput(Exception):
    pass


def metrics(run):
    path = os.path.join(run, "checkpoints", "metrics.jsonl")
    try:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: {e}")
    if not rows:
        raise BadInput(f"{path}: no metric lines (nothing to compare)")
    return rows


def same_file(a, b):
    try:
        return filecmp.cmp(a, b, shallow=False)
    except OSError as e:
        raise BadInput(str(e))


def main():
    try:
        return compare()
    except BadInput as e:
        print(f"compare_runs: {e}", file=sys.stderr)
        return 2


def compare():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = sys.argv[1:]
    ma, mb = metrics(a), metrics(b)
    bad = 0 if len(ma) == len(mb) else 1
    if bad:
        print(f"metrics.jsonl: {len(ma)} lines vs {len(mb)}")
    n = 0
    for la, lb in zip(ma, mb):
        for k in sorted(set(la) | set(lb)):
            if k.startswith("timing_s/") or k.startswith("perf/"):
                continue
            n += 1
            if la.get(k) != lb.get(k):
                bad += 1
                if bad < 20:
                    print(f"step {la.get('step')}: {k}: {la.get(k)!r} vs {lb.get(k)!r}")
    def steps(r):
        return {int(m.group(1)) for d in os.listdir(os.path.join(r, "checkpoints"))
                if (m := re.fullmatch(r"global_step_(\d+)", d))}
    common = steps(a) & steps(b)
    if not common:
        print("no checkpoint step present in both runs")
        return 1
    last = max(common)
    files = ["actor/huggingface/model.safetensors", "actor/optim.safetensors"]
    for f in files:
        pa, pb = (os.path.join(r, "checkpoints", f"global_step_{last}", f) for r in (a, b))
        same = same_file(pa, pb)
        print(f"global_step_{last}/{f}: {'bitwise equal' if same else 'DIFFERENT'}")
        bad += not same
    print(f"{len(ma)} metric lines, {n} values compared (timing_s/*, perf/* skipped): "
          f"{'all equal' if bad == 0 else f'{bad} differences'}")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
