# bench/verify/sleep_reward.py: a reward function bound by waiting, not by CPU (an HTTP call, a sandbox run): it
# sleeps $DAPO_SLEEP_MS (default 10) milliseconds and returns 1.0. bench_pyreward uses it to show that scoring
# throughput scales with reward_model.num_workers when the CPU is not the limit (2 cores cap a CPU-bound one).
import os
import time

_s = float(os.environ.get("DAPO_SLEEP_MS", "10")) / 1000.0


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    time.sleep(_s)
    return 1.0
