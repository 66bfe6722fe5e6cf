# bench/verify/verl_math_dapo_reward.py: verl's own math_dapo.compute_score as a verl custom reward function
# (custom_reward_function.path / .name = compute_score), for bench_pyreward's Python path. Loads only the file
# verl/utils/reward_score/math_dapo.py from $DAPO_VERL_MATH_DIR (a --no-deps verl install, see run.sh).
import importlib.util
import os

_path = os.path.join(os.environ["DAPO_VERL_MATH_DIR"], "verl", "utils", "reward_score", "math_dapo.py")
_spec = importlib.util.spec_from_file_location("verl_math_dapo", _path)
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    return _mod.compute_score(solution_str, ground_truth, bool((extra_info or {}).get("strict_box", False)))
