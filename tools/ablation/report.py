#!/usr/bin/env python3
"""tools/ablation/report.py: docs/ablation.md and its plots from the run directories tools/ablation/run.sh made.

  python3 tools/ablation/report.py --dir runs/ablation --steps 40 --out docs/ablation.md --img docs/img

Reads, per row and seed, <dir>/<row>/s<seed>/{done.json, eval.json, checkpoints/metrics.jsonl} and the control's
<dir>/sft-control/s<seed>/{done.json, eval.json}; the final score of every row is dapo-eval's mean@k on the
held-out set (the same sampler and scorer for the RL rows, the control and the base model). Writes the table (mean,
standard deviation, min-max over seeds, in the paper's row order), the step-0 statistics of the task, each claim of
the paper checked against the numbers by the rule stated in the text, and the plots (matplotlib, pip):
  ablation.png           held-out mean@k against step and against training wall-clock, mean and min-max band
  ablation-curves.png    entropy, response length, truncation rate and generated samples per step, per row
  ablation-entropy.png   entropy without (row 2) and with (row 3) clip-higher, every seed (the paper's Figure 2)
tools/ablation/notes.md, when it exists, is copied in under "Reading" (the hand-written interpretation).
The product never imports Python; this runs only after `make ablation`."""
import argparse
import json
import os
import re
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROWS = [
    ("1-naive-grpo", "Naive GRPO", 30),
    ("2-overlong-filtering", "+ Overlong filtering", 36),
    ("3-clip-higher", "+ Clip-higher", 38),
    ("4-soft-overlong", "+ Soft overlong punishment", 41),
    ("5-token-mean", "+ Token-level loss", 42),
    ("6-dynamic-sampling", "+ Dynamic sampling (DAPO)", 50),
    ("7-dapo-default", "dapo default (no overlong filtering)", None),
]
VAL = "val-core/arith/acc/mean@4"
ROLLOUT_N = 8          # actor_rollout_ref.rollout.n of every row (configs/ablation/)


def load_jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def load_run(d):
    """A finished run: its done.json, final dapo-eval score, training steps and validation points."""
    if not os.path.exists(os.path.join(d, "done.json")):
        return None
    try:
        done = json.load(open(os.path.join(d, "done.json")))
        ev = json.load(open(os.path.join(d, "eval.json")))
        score = ev["benchmarks"]["test"]["mean@%d" % ev["benchmarks"]["test"]["n"]]
    except (OSError, ValueError, KeyError) as e:
        raise SystemExit("report: %s: not a finished run (%s); run tools/ablation/run.sh again to redo it" % (d, e))
    run = {"done": done, "score": score, "steps": [], "val": [], "config": read_config(d)}
    mpath = os.path.join(d, "checkpoints", "metrics.jsonl")
    if os.path.exists(mpath):
        clock = 0.0
        for m in load_jsonl(mpath):
            if "timing_s/step" in m:
                clock += m["timing_s/step"]
                m["clock_s"] = clock
                run["steps"].append(m)
            elif VAL in m:
                run["val"].append((m["step"], clock, m[VAL]))
    return run


def read_config(d):
    """The few numbers the text quotes, from the run's resolved config (deploy/local/run.sh's config.yaml)."""
    out = {}
    try:
        text = open(os.path.join(d, "config.yaml")).read()
    except OSError:
        return out
    text = re.sub(r"  # [^\n]*", "", text)          # --print-config's "# where it came from" comments
    for key, pat in (("max_response_length", r"\n  max_response_length: (\d+)"),
                     ("buffer", r"\n  overlong_buffer:\n    enable: \w+\n    len: (\d+)"),
                     ("train_batch_size", r"\n  train_batch_size: (\d+)"), ("test_freq", r"\n  test_freq: (\d+)")):
        m = re.search(pat, text)
        if m:
            out[key] = int(m.group(1))
    return out


def stats(xs):
    if not xs:
        return None
    return {"mean": statistics.mean(xs), "sd": statistics.stdev(xs) if len(xs) > 1 else 0.0,
            "min": min(xs), "max": max(xs), "n": len(xs)}


def fmt(s, scale=100.0):
    if s is None:
        return "–", "–", "–"
    return ("%.1f" % (s["mean"] * scale), "%.1f" % (s["sd"] * scale),
            "%.1f–%.1f" % (s["min"] * scale, s["max"] * scale))


def seed_dirs(base):
    if not os.path.isdir(base):
        return []
    return sorted(os.path.join(base, s) for s in os.listdir(base) if s.startswith("s"))


def step_mean(runs, key, upto=None):
    """Per run, the mean of key over its steps (the first `upto` steps when given)."""
    out = []
    for r in runs:
        v = [m[key] for m in r["steps"][:upto] if key in m]
        if v:
            out.append(statistics.mean(v))
    return out


def curve(runs, key):
    """Step -> list over runs of key at that step."""
    by = {}
    for r in runs:
        for m in r["steps"]:
            if key in m:
                by.setdefault(int(m["step"]), []).append(m[key])
    return sorted(by.items())


def plot_main(rows, img, k):
    fig, ax = plt.subplots(1, 2, figsize=(13, 4.8))
    for name, label, _ in ROWS:
        runs = rows.get(name, [])
        if not runs:
            continue
        by = {}
        for r in runs:
            for step, clock, v in r["val"]:
                by.setdefault(step, []).append((clock, v))
        pts = sorted(by.items())
        xs = [p[0] for p in pts]
        mean = [statistics.mean(v for _, v in p[1]) * 100 for p in pts]
        lo = [min(v for _, v in p[1]) * 100 for p in pts]
        hi = [max(v for _, v in p[1]) * 100 for p in pts]
        clocks = [statistics.mean(c for c, _ in p[1]) / 60 for p in pts]
        line = ax[0].plot(xs, mean, marker="o", ms=3, label=label)[0]
        ax[0].fill_between(xs, lo, hi, color=line.get_color(), alpha=0.12)
        ax[1].plot(clocks, mean, marker="o", ms=3, color=line.get_color(), label=label)
        ax[1].fill_between(clocks, lo, hi, color=line.get_color(), alpha=0.12)
    ax[0].set_xlabel("training step")
    ax[1].set_xlabel("training wall-clock (min, mean over seeds; validation excluded)")
    for a in ax:
        a.set_ylabel("held-out mean@%d (%%)" % k)
        a.grid(alpha=0.3)
    ax[0].legend(fontsize=8)
    fig.suptitle("DAPO ablation at small scale: held-out accuracy (mean over seeds, band = min–max)")
    fig.tight_layout()
    fig.savefig(os.path.join(img, "ablation.png"), dpi=110)
    plt.close(fig)


def smooth(v, w=5):
    """Trailing moving average over w points (fewer at the start)."""
    return [statistics.mean(v[max(0, i - w + 1):i + 1]) for i in range(len(v))]


def plot_entropy(rows, img):
    """The paper's Figure 2 at small scale: entropy without (row 2) and with (row 3) clip-higher, every seed."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, label, _ in ROWS[1:3]:
        color = None
        for r in rows.get(name, []):
            xs = [m["step"] for m in r["steps"]]
            line = ax.plot(xs, smooth([m["actor/entropy"] for m in r["steps"]]), lw=0.8, alpha=0.45, color=color)[0]
            color = line.get_color()
        pts = curve(rows.get(name, []), "actor/entropy")
        if pts:
            ax.plot([p[0] for p in pts], smooth([statistics.mean(p[1]) for p in pts]), lw=2.2, color=color,
                    label=label + " (mean; thin: seeds)")
    ax.set_xlabel("training step")
    ax.set_ylabel("policy entropy (nats / token, 5-step average)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Clip-higher and entropy (the paper's Figure 2)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(img, "ablation-entropy.png"), dpi=110)
    plt.close(fig)


def plot_curves(rows, img, n):
    keys = [("actor/entropy", "entropy of the policy (nats / token)", 1),
            ("response_length/mean", "mean response length (tokens)", 1),
            ("response_length/clip_ratio", "truncated responses (%)", 100),
            ("batch/groups_generated", "samples generated per step", n)]
    fig, axs = plt.subplots(2, 2, figsize=(13, 8))
    for (key, title, scale), a in zip(keys, axs.flat):
        for name, label, _ in ROWS:
            runs = rows.get(name, [])
            pts = curve(runs, key)
            if not pts:
                continue
            a.plot([p[0] for p in pts], smooth([statistics.mean(p[1]) * scale for p in pts]), label=label, lw=1.3)
        a.set_title(title, fontsize=10)
        a.set_xlabel("training step")
        a.grid(alpha=0.3)
    axs.flat[0].legend(fontsize=8)
    fig.suptitle("Per-row training curves (mean over seeds, 5-step moving average)")
    fig.tight_layout()
    fig.savefig(os.path.join(img, "ablation-curves.png"), dpi=110)
    plt.close(fig)


def verdict(delta, noise, n=2):
    if n < 2:
        return "n/a (fewer than 2 seeds)"
    if delta > noise:
        return "reproduces"
    if delta < -noise:
        return "reversed"
    return "within noise"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--command", default="make ablation")
    ap.add_argument("--out", required=True)
    ap.add_argument("--img", required=True)
    a = ap.parse_args()
    os.makedirs(a.img, exist_ok=True)
    rows = {}
    for name, _, _ in ROWS:
        rows[name] = [r for r in (load_run(d) for d in seed_dirs(os.path.join(a.dir, name))) if r]
    control = [r for r in (load_run(d) for d in seed_dirs(os.path.join(a.dir, "sft-control"))) if r]
    try:
        base = json.load(open(os.path.join(a.dir, "base-eval.json")))["benchmarks"]["test"]
    except (OSError, ValueError, KeyError) as e:
        raise SystemExit("report: %s: no base-model score (%s): run tools/ablation/run.sh first" % (a.dir, e))
    k = base["n"]
    base_score = base["mean@%d" % k]
    any_run = next((r for rs in rows.values() for r in rs), None)
    if any_run is None:
        raise SystemExit("report: no finished run under %s" % a.dir)
    plot_main(rows, a.img, k)
    plot_curves(rows, a.img, ROLLOUT_N)
    plot_entropy(rows, a.img)
    write_doc(a, rows, control, base_score, k, any_run)


def step0(rows):
    """The task at step 0: step 1's rollouts are the base model's (no update yet), one set per seed: row 1's runs
    (rows 1-5 generate the same step-1 rollouts for a seed; there is no dynamic sampling in row 1, so the generated
    groups are the whole batch)."""
    trunc, solve_all, solve_none, groups = [], 0, 0, 0
    for name, _, _ in ROWS[:1]:
        for r in rows[name]:
            if not r["steps"]:
                continue
            m = r["steps"][0]
            trunc.append(m["response_length/clip_ratio"])
            solve_all += m["batch/groups_solve_all"]
            solve_none += m["batch/groups_solve_none"]
            groups += m["batch/groups_generated"]
    return trunc, solve_all, solve_none, groups


def write_doc(a, rows, control, base_score, k, any_run):
    done = any_run["done"]
    L = []
    L.append("# The DAPO ablation at small scale\n")
    L.append("Does each technique of DAPO (arXiv 2503.14476, Table 1) do in dapo what the paper says, at a scale "
             "that runs on 2 CPU cores? This page is written by `%s` (tools/ablation/run.sh, then "
             "tools/ablation/report.py); nothing in it is typed by hand except the section *Reading*.\n" % a.command)
    L.append("- **Machine:** %s. **Build:** %s. **Date:** %s." % (done["cpu"], done["build"], done["date"][:10]))
    nseeds = min((len(v) for v in rows.values()), default=0)
    seeds = sorted({os.path.basename(d)[1:] for name, _, _ in ROWS for d in seed_dirs(os.path.join(a.dir, name))})
    cfg = any_run["config"]
    L.append("- **Budget:** %d training steps per run, at least %d seeds per row (seeds %s: `data.seed` and "
             "`trainer.seed`), every row from the same base model." % (a.steps, nseeds, ", ".join(seeds)))
    L.append("- **Score:** `dapo-eval` mean@%d on the held-out problems (temperature 1.0, top_p 1.0, %s tokens, "
             "the training prompts' chat template), the same for every row, the control and the base model; "
             "the curves use the runs' own validation (the same sampler, every %s steps)." % (
                 k, cfg.get("max_response_length", "?"), cfg.get("test_freq", "?")))
    L.append("- **Wall-clock:** training time (the sum of `timing_s/step`, validation excluded), on one CPU model.\n")
    trunc, sa, sn, g = step0(rows)
    if g:
        L.append("## The task\n")
        L.append("`dapo-gen-arith --ops 1-4`: arithmetic word problems of 1 to 4 steps (a worked solution of 11 to 53 "
                 "tiny-tokenizer tokens) under `max_response_length` %d, so the longest solutions do not fit; the "
                 "soft overlong punishment (rows 4-7) starts at %d tokens (buffer %d). At step 0 (the base model's "
                 "rollouts: step 1 of row 1, one run per seed, %d groups of %d; rows 2-5 generate the same):\n" % (
                     cfg.get("max_response_length", 0), cfg.get("max_response_length", 0) - cfg.get("buffer", 0),
                     cfg.get("buffer", 0), g, ROLLOUT_N))
        L.append("| truncated responses | groups solved by all 8 | groups solved by none |")
        L.append("|---|---|---|")
        L.append("| %.1f%% (seeds: %.1f–%.1f%%) | %.1f%% | %.1f%% |\n" % (
            100 * statistics.mean(trunc), 100 * min(trunc), 100 * max(trunc), 100 * sa / g, 100 * sn / g))
    L.append("## Table 1, small scale\n")
    L.append("Held-out mean@%d (%%) after %d steps; the base model scores %.1f. The paper's column is AIME 2024 "
             "avg@32 on Qwen2.5-32B, for the order of the rows only.\n" % (k, a.steps, 100 * base_score))
    L.append("| row | mean | sd | min–max | seeds | training wall-clock (s, median) | paper (AIME avg@32) |")
    L.append("|---|---|---|---|---|---|---|")
    S = {}
    for name, label, paper in ROWS:
        s = stats([r["score"] for r in rows[name]])
        S[name] = s
        wall = statistics.median(r["done"]["train_s"] for r in rows[name]) if rows[name] else None
        m, sd, mm = fmt(s)
        L.append("| %s | %s | %s | %s | %d | %s | %s |" % (label, m, sd, mm, s["n"] if s else 0,
                                                           "%.0f" % wall if wall else "–", paper or "–"))
    sc = stats([r["score"] for r in control])
    m, sd, mm = fmt(sc)
    cw = statistics.median(r["done"]["train_s"] for r in control) if control else None
    L.append("| SFT-only control (same wall-clock as row 6) | %s | %s | %s | %d | %s | – |\n" % (
        m, sd, mm, sc["n"] if sc else 0, "%.0f" % cw if cw else "–"))
    L.append("![held-out accuracy against steps and wall-clock](img/ablation.png)\n")
    L.append("![entropy, length, truncation and generated samples per step](img/ablation-curves.png)\n")
    L.append("![entropy with and without clip-higher, every seed](img/ablation-entropy.png)\n")
    L.extend(claims(rows, S, sc, a.steps))
    notes = os.path.join(os.path.dirname(os.path.abspath(__file__)), "notes.md")
    if os.path.exists(notes):
        # the hand-written reading names the run it reads: "<!-- for build B, STEPS steps, N seeds -->" first
        text = open(notes).read().strip()
        tag = "<!-- for build %s, %d steps, %d seeds -->" % (any_run["done"]["build"], a.steps, nseeds)
        L.append("## Reading\n")
        if text.startswith(tag):
            L.append(text[len(tag):].strip() + "\n")
        else:
            L.append("tools/ablation/notes.md reads another run (%s); these runs (%s) have no reading yet.\n" % (
                text.splitlines()[0] if text else "empty", tag))
    L.append("## Reproduce\n")
    L.append("```\n%s          # resumable: finished runs are kept\n```\n" % a.command)
    L.append("The rows are `configs/ablation/1-naive-grpo.yaml` .. `7-dapo-default.yaml`, each naming the previous one "
             "as its base (`defaults:`) and holding only its one change (row 1: the default recipe's changes). Runs, "
             "logs and metrics stay under `%s/`." % os.path.relpath(a.dir))
    with open(a.out, "w") as f:
        f.write("\n".join(L) + "\n")


def claims(rows, S, sc, steps):
    """The paper's claims, each with the numbers and the rule: a difference of means counts when it is larger than
    the larger of the two rows' standard deviations across seeds."""
    L = ["## The paper's claims, checked\n",
         "Rule: a change counts as reproducing when the difference of the two rows' means is larger than the larger "
         "of their standard deviations over seeds; 'reversed' when it is as large the other way; else 'within "
         "noise'.\n",
         "| claim (paper) | here | verdict |", "|---|---|---|"]
    for i in range(1, 6):
        prev, cur = ROWS[i - 1][0], ROWS[i][0]
        if not S[prev] or not S[cur]:
            continue
        d = S[cur]["mean"] - S[prev]["mean"]
        noise = max(S[cur]["sd"], S[prev]["sd"])
        L.append("| %s adds %+d points | %+.1f points (sd %.1f) | %s |" % (
            ROWS[i][1], ROWS[i][2] - ROWS[i - 1][2], 100 * d, 100 * noise,
            verdict(d, noise, min(S[cur]["n"], S[prev]["n"]))))
    if S["1-naive-grpo"] and S["6-dynamic-sampling"]:
        d = S["6-dynamic-sampling"]["mean"] - S["1-naive-grpo"]["mean"]
        noise = max(S["6-dynamic-sampling"]["sd"], S["1-naive-grpo"]["sd"])
        L.append("| DAPO beats naive GRPO (+20) | %+.1f points (sd %.1f) | %s |" % (
            100 * d, 100 * noise, verdict(d, noise, min(S["6-dynamic-sampling"]["n"], S["1-naive-grpo"]["n"]))))
    ent = ("2-overlong-filtering", "3-clip-higher")
    late = {n: [statistics.mean(m["actor/entropy"] for m in r["steps"][-10:]) for r in rows[n]]
            for n in ent}
    first = {n: [statistics.mean(m["actor/entropy"] for m in r["steps"][:5]) for r in rows[n]] for n in ent}
    if all(late.values()) and all(first.values()) and steps >= 15:
        a_, b_ = late["2-overlong-filtering"], late["3-clip-higher"]
        fa, fb = statistics.mean(first["2-overlong-filtering"]), statistics.mean(first["3-clip-higher"])
        d = statistics.mean(b_) - statistics.mean(a_)
        noise = max(statistics.stdev(a_) if len(a_) > 1 else 0, statistics.stdev(b_) if len(b_) > 1 else 0)
        L.append("| Clip-higher keeps entropy from collapsing (Fig. 2) | entropy, first 5 steps -> last 10: row 2 "
                 "%.3f -> %.3f, row 3 %.3f -> %.3f | %s |" % (fa, statistics.mean(a_), fb, statistics.mean(b_),
                                                              verdict(d, noise, min(len(a_), len(b_)))))
    ds, nd = rows["6-dynamic-sampling"], rows["5-token-mean"]
    if ds and nd:
        gen = step_mean(ds, "batch/groups_generated")
        L.append("| Dynamic sampling costs more generation per step but fewer steps (Fig. 6) | row 6 generates %.1f "
                 "groups per step (row 5: %.0f); training wall-clock median %.0f s vs %.0f s | see the wall-clock "
                 "plot |" % (statistics.mean(gen), statistics.mean(step_mean(nd, "batch/groups_generated")),
                             statistics.median(r["done"]["train_s"] for r in ds),
                             statistics.median(r["done"]["train_s"] for r in nd)))
    if sc and S["6-dynamic-sampling"]:
        d = S["6-dynamic-sampling"]["mean"] - sc["mean"]
        noise = max(S["6-dynamic-sampling"]["sd"], sc["sd"])
        L.append("| RL adds over more SFT for the same time | row 6 %+.1f points over the control (sd %.1f) | %s |"
                 % (100 * d, 100 * noise, verdict(d, noise, min(S["6-dynamic-sampling"]["n"], sc["n"]))))
    L.append("")
    return L


if __name__ == "__main__":
    main()
