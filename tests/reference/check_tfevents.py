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
    # (step, metric) -> the values in file order: a step may have two lines (the last step's training and its
    # validation, as verl logs them), and then two events
    want = {}
    for row in rows:
        for key, value in row.items():
            if key != "step" and value is not None and math.isfinite(value):
                want.setdefault((row["step"], key), []).append(value)
    bad = 0
    per_step = {}
    for (step, key), values in sorted(want.items()):
        if key not in tags:
            print("step %d: %s missing from the event files" % (step, key))
            bad += 1
            continue
        got = [e.value for e in acc.Scalars(key) if e.step == step]
        if len(got) != len(values) or not all(math.isclose(g, f32(v), rel_tol=2.4e-7, abs_tol=1e-38)
                                              for g, v in zip(got, values)):
            print("step %d: %s = %s in tfevents, %r in metrics.jsonl" % (step, key, got, values))
            bad += 1
        per_step[step] = per_step.get(step, 0) + len(values)
    for step in sorted(per_step):
        print("step %d: %d scalars equal" % (step, per_step[step]))
    steps_tb = sorted({e.step for t in tags for e in acc.Scalars(t)})
    steps_js = sorted({r["step"] for r in rows})
    if steps_tb != steps_js:
        print("steps differ: tfevents %s, metrics.jsonl %s" % (steps_tb, steps_js))
        bad += 1
    print("check_tfevents: %d files, %d steps, %s" % (len(files), len(steps_js), "FAILED" if bad else "all equal"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
