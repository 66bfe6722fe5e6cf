#!/usr/bin/env python3
"""tests/reference/check_tfevents.py TB_DIR METRICS_JSONL: reads the TensorBoard event files dapo wrote in TB_DIR with
the tensorboard package's own reader (tensorboard.backend.event_processing.event_accumulator, which checks the
record CRCs) and compares them with metrics.jsonl: the same steps, and for every step every finite metric as a
scalar equal to the JSON value within float32 rounding (TensorBoard's simple_value is a float; metrics.jsonl keeps 10
significant digits, so the two roundings may land one float32 ulp apart). Prints one line per step; exits 1 on any
difference. pip: tensorboard (tests/reference/requirements-tfevents.txt). Run by `make check-tfevents`."""
import glob
import json
import math
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def main():
    tb_dir, metrics_path = sys.argv[1], sys.argv[2]
    files = glob.glob(tb_dir + "/events.out.tfevents.*")
    if not files:
        sys.exit("no event files in %s" % tb_dir)
    acc = event_accumulator.EventAccumulator(tb_dir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    rows = [json.loads(l) for l in open(metrics_path) if l.strip()]
    bad = 0
    for row in rows:
        step = row["step"]
        n = 0
        for key, value in row.items():
            if key == "step" or value is None or not math.isfinite(value):
                continue
            if key not in tags:
                print("step %d: %s missing from the event files" % (step, key))
                bad += 1
                continue
            got = [e.value for e in acc.Scalars(key) if e.step == step]
            if len(got) != 1 or not math.isclose(got[0], f32(value), rel_tol=2.4e-7, abs_tol=1e-38):
                print("step %d: %s = %s in tfevents, %r in metrics.jsonl" % (step, key, got, value))
                bad += 1
            n += 1
        print("step %d: %d scalars equal" % (step, n))
    steps_tb = sorted({e.step for t in tags for e in acc.Scalars(t)})
    steps_js = sorted({r["step"] for r in rows})
    if steps_tb != steps_js:
        print("steps differ: tfevents %s, metrics.jsonl %s" % (steps_tb, steps_js))
        bad += 1
    print("check_tfevents: %d files, %d steps, %s" % (len(files), len(steps_js), "FAILED" if bad else "all equal"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
