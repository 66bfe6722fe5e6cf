#!/usr/bin/env python3
"""Writes tests/data/verl/: verl's config surface as the pinned release has it (issue 37), read by
tests/unit/test_config_verl.c.

  ppo_trainer.keys   every leaf key of verl 0.9.1's verl/trainer/config/_generated_ppo_trainer.yaml (the resolved
                     default config of `python3 -m verl.trainer.main_ppo`), one "key<TAB>value" line each, the value
                     as a Hydra override writes it (null, true/false, [a, b], {} for an empty mapping; interpolations
                     such as ${oc.select:...} kept as text). From the wheel pinned in requirements-verl.txt
                     (pip download --no-deps into ~/.cache/dapo/verl-wheel, or $DAPO_VERL_WHEEL_DIR).
  <name>.args        the overrides one of verl's example scripts passes to verl.trainer.main_ppo, one per line, with
                     the script's own defaults substituted (each script run by bash with a stub python3 that prints
                     its arguments; HOME is '~'; the scripts' environment knobs unset, DEVICE=gpu). The header names
                     the script's path, the tag and its sha256. The scripts are not in verl's wheel or sdist: they come
                     from a git checkout of github.com/verl-project/verl given as $VERL_GIT (a repository directory)
                     at $VERL_TAG (default v0.9.1; the tag must be in that repository). Without $VERL_GIT only
                     ppo_trainer.keys is written.

Usage: python3 tests/reference/make_verl_fixtures.py      (needs PyYAML and pip; network for the wheel once)
"""
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "data", "verl")
YAML_IN_WHEEL = "verl/trainer/config/_generated_ppo_trainer.yaml"

SCRIPTS = {   # name in tests/data/verl -> path in verl's repository
    "grpo_qwen3_4b_fsdp": "examples/grpo_trainer/run_qwen3_4b_fsdp.sh",
    "cispo_qwen3_8b_fsdp": "examples/cispo_trainer/run_qwen3_8b_fsdp.sh",
    "gspo_qwen3_8b_fsdp": "examples/gspo_trainer/run_qwen3_8b_fsdp.sh",
    "one_step_off_dapo_7b_math_fsdp2_colocate":
        "verl/experimental/one_step_off_policy/shell/dapo_7b_math_fsdp2_colocate.sh",
    # issue 40: verl's algorithm family
    "sapo_qwen3_8b_fsdp": "examples/sapo_trainer/run_qwen3_8b_fsdp.sh",
    "gmpo_qwen3_8b_fsdp": "examples/gmpo_trainer/run_qwen3_8b_fsdp.sh",
    "gpg_qwen3_8b_fsdp": "examples/gpg_trainer/run_qwen3_8b_fsdp.sh",
    "rloo_qwen3_8b_fsdp": "examples/rloo_trainer/run_qwen3_8b_fsdp.sh",
    "reinforce_plus_plus_qwen3_8b_fsdp": "examples/reinforce_plus_plus_trainer/run_qwen3_8b_fsdp.sh",
    # issue 41: verl's fully asynchronous DAPO recipe (python -m verl.experimental.fully_async_policy.fully_async_main)
    "fully_async_dapo_7b_math_fsdp2_4_12": "verl/experimental/fully_async_policy/shell/dapo_7b_math_fsdp2_4_12.sh",
}


def pinned_verl():
    with open(os.path.join(HERE, "requirements-verl.txt")) as f:
        for line in f:
            if line.startswith("verl=="):
                return line.strip().split("==")[1]
    sys.exit("requirements-verl.txt pins no verl")


def hydra_text(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{}"
    if isinstance(v, list):
        return "[" + ", ".join(hydra_text(x) for x in v) + "]"
    return str(v)


def write_keys(version):
    wheel_dir = os.environ.get("DAPO_VERL_WHEEL_DIR", os.path.expanduser("~/.cache/dapo/verl-wheel"))
    wheels = glob.glob(os.path.join(wheel_dir, f"verl-{version}-*.whl"))
    if not wheels:
        subprocess.check_call([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", wheel_dir,
                               f"verl=={version}"])
        wheels = glob.glob(os.path.join(wheel_dir, f"verl-{version}-*.whl"))
    with zipfile.ZipFile(wheels[0]) as z:
        text = z.read(YAML_IN_WHEEL)
    lines = []

    def walk(prefix, v):
        if isinstance(v, dict) and v:
            for k, x in v.items():
                walk(prefix + [str(k)], x)
        else:
            value = hydra_text(v)
            assert "\t" not in value and "\n" not in value, prefix
            lines.append(".".join(prefix) + "\t" + value)

    walk([], yaml.safe_load(text))
    with open(os.path.join(OUT, "ppo_trainer.keys"), "w") as f:
        f.write(f"# verl {version} {YAML_IN_WHEEL} (wheel {os.path.basename(wheels[0])}), sha256 "
                f"{hashlib.sha256(text).hexdigest()}: {len(lines)} keys, written by "
                "tests/reference/make_verl_fixtures.py\n")
        f.write("\n".join(lines) + "\n")
    print(f"wrote ppo_trainer.keys ({len(lines)} keys)")


STUB = """#!/bin/sh
# stands in for python3: `python3 -m verl.trainer.main_ppo ARGS` prints ARGS, anything else fails (no torch_npu)
if [ "$1" = "-m" ]; then shift 2; for a in "$@"; do printf '%s\\n' "$a"; done >> "$ARGS_OUT"; exit 0; fi
exit 1
"""


def write_args(git_dir, tag):
    tmp = tempfile.mkdtemp()
    try:
        stub_dir = os.path.join(tmp, "bin")
        os.mkdir(stub_dir)
        with open(os.path.join(stub_dir, "python3"), "w") as f:
            f.write(STUB)
        os.chmod(os.path.join(stub_dir, "python3"), 0o755)
        os.symlink("python3", os.path.join(stub_dir, "python"))    # the fully async recipes call `python -m`
        for name, path in SCRIPTS.items():
            script = subprocess.check_output(["git", "--git-dir", git_dir, "show", f"{tag}:{path}"])
            spath = os.path.join(tmp, name + ".sh")
            with open(spath, "wb") as f:          # `ulimit -n 32768` (the SAPO script's) may exceed the hard limit
                f.write(b"ulimit() { :; }\n" + script)
            out = os.path.join(tmp, name + ".out")
            env = {"PATH": stub_dir + ":/usr/bin:/bin", "HOME": "~", "ARGS_OUT": out}
            subprocess.check_call(["bash", spath], env=env, cwd=tmp, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
            with open(out) as f:
                args = f.read()
            with open(os.path.join(OUT, name + ".args"), "w") as f:
                f.write(f"# {path} at verl's {tag} (github.com/verl-project/verl), sha256 "
                        f"{hashlib.sha256(script).hexdigest()}: its overrides to verl.trainer.main_ppo with its "
                        "defaults substituted, written by tests/reference/make_verl_fixtures.py\n")
                f.write(args)
            print(f"wrote {name}.args ({args.count(chr(10))} overrides)")
    finally:
        shutil.rmtree(tmp)


def main():
    os.makedirs(OUT, exist_ok=True)
    write_keys(pinned_verl())
    if os.environ.get("VERL_GIT"):
        write_args(os.environ["VERL_GIT"], os.environ.get("VERL_TAG", "v" + pinned_verl()))


if __name__ == "__main__":
    main()
