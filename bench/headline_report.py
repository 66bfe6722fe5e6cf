#!/usr/bin/env python3
"""bench/headline_report.py [--duration S] [--gain G] RUN_DIR...: the README headline table of bench/headline.sh runs.

For each run directory (deploy/local/run.sh's, with launch.txt holding the launch's Unix time): held-out mean@4
(val-core/arith/acc/mean@4) at step 0, the first validation at least G (20) points above it (seconds since launch,
from the coordinator log's timestamps, and its step), the last validation within S seconds of launch, and how many
steps finished within S seconds. Standard library only."""
import argparse
import datetime
import os
import re
import sys

KEY = "val-core/arith/acc/mean@4"
LINE = re.compile(r"^(\S+Z) \S+\s+coordinator (?:\[step (\d+)\] )?validation " + re.escape(KEY) + r" = ([0-9.]+)")
DONE = re.compile(r"^(\S+Z) .*coordinator .*step (\d+) done in ")


def stamp(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def run_rows(d, duration):
    launch = float(open(os.path.join(d, "launch.txt")).read().split()[0])
    vals = []
    with open(os.path.join(d, "logs", "coordinator.log"), errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                t = stamp(m.group(1)) - launch
                if t >= 0:
                    vals.append((t, int(m.group(2) or 0), float(m.group(3))))
    # the steps finished within the duration ("step N done in" lines: metrics.jsonl rows carry no time)
    steps = 0
    with open(os.path.join(d, "logs", "coordinator.log"), errors="replace") as f:
        for line in f:
            m = DONE.match(line)
            if m and 0 <= stamp(m.group(1)) - launch <= duration:
                steps = max(steps, int(m.group(2)))
    return vals, steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=900)
    ap.add_argument("--gain", type=float, default=20)
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    print(f"| run | mean@4 at step 0, % | first +{a.gain:g} points | last validation within {a.duration:g} s "
          f"| steps in {a.duration:g} s |")
    print("|---|---|---|---|---|")
    for d in a.runs:
        try:
            vals, steps = run_rows(d, a.duration)
        except (OSError, ValueError) as e:
            print(f"headline_report: {d}: {e}", file=sys.stderr)
            return 2
        vals = [v for v in vals if v[0] <= a.duration]
        if not vals or vals[0][1] != 0:
            print(f"headline_report: {d}: no validation at step 0 in its coordinator log", file=sys.stderr)
            return 2
        base = vals[0][2] * 100
        first = next((v for v in vals if v[2] * 100 - base >= a.gain), None)
        last = vals[-1]
        first_s = f"{first[0]:.0f} s (step {first[1]})" if first else "not reached"
        print(f"| {os.path.basename(os.path.normpath(d))} | {base:.1f} | {first_s} | {last[2] * 100:.1f} "
              f"({last[2] * 100 - base:+.1f}) at {last[0]:.0f} s, step {last[1]} | {steps} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
