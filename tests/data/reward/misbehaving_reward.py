# tests/data/reward/misbehaving_reward.py: a verl-style custom reward function for the verifier and cluster tests
# (custom_reward_function.path). It scores "Answer: X" against the ground truth like a tiny math_dapo, and
# misbehaves on purpose when the ground truth names a failure:
#   "sleep"  sleeps for ever (the deadline must kill it)      "segv"   segfaults the interpreter through ctypes
#   "oom"    allocates without bound (RLIMIT_AS must stop it) "raise"  raises ValueError
#   "bad"    returns a string (not a score)                    "float"  returns a plain float 0.25
#   "nap"    sleeps 50 ms, then scores 1.0 (throughput with several workers)
#   "huge"   returns 1e300 (no 32-bit float holds it)    "spawn"  starts `sleep 314159`, then hangs (a sandbox)
#   "stdin"  reads stdin: 0.5 when it is empty (it must not be the verifier's pipe)
import ctypes
import subprocess
import sys
import time


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if ground_truth == "sleep":
        while True:
            time.sleep(3600)
    if ground_truth == "segv":
        ctypes.string_at(0)
    if ground_truth == "oom":
        hog = []
        while True:
            hog.append(bytearray(128 << 20))
    if ground_truth == "raise":
        raise ValueError("no score for this one")
    if ground_truth == "bad":
        return "not a number"
    if ground_truth == "float":
        return 0.25
    if ground_truth == "huge":
        return 1e300
    if ground_truth == "spawn":
        subprocess.Popen(["sleep", "314159"])
        while True:
            time.sleep(3600)
    if ground_truth == "stdin":
        return 0.5 if sys.stdin.read() == "" else -0.5
    if ground_truth == "nap":
        time.sleep(0.05)
        return 1.0
    print("scoring one item")          # must not reach the protocol pipe
    pred = solution_str.rsplit("Answer:", 1)[-1].strip() if "Answer:" in solution_str else None
    ok = pred == ground_truth
    return {"score": 1.0 if ok else -1.0, "acc": ok, "pred": pred,
            "response_chars": len(solution_str), "source_is_math": data_source == "math_dapo"}
