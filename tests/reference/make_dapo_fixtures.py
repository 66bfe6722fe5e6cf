#!/usr/bin/env python3
"""Writes tests/data/dapo/*.bin: reference values for common/dapo (loss, aggregation, metrics, gradients,
GRPO advantages) computed by verl's OWN functions, imported from the verl package, and for the sampler
(common/model/sample.c) by Hugging Face transformers' own logits warpers (sample_cases.bin):
  verl.trainer.ppo.core_algos.compute_policy_loss_vanilla   pg_loss, pg_clipfrac, pg_clipfrac_lower, ppo_kl
  verl.trainer.ppo.core_algos.agg_loss                      entropy aggregation (same mode / global info)
  verl.trainer.ppo.core_algos.compute_grpo_outcome_advantage
  verl.trainer.ppo.rollout_corr_helper.compute_offpolicy_metrics / compute_rollout_correction_weights
  verl.trainer.ppo.rollout_corr_helper.compute_rollout_rejection_mask / compute_rollout_correction_and_rejection_mask
  verl.trainer.ppo.core_algos.compute_policy_loss_bypass_mode    (rollout_rs_cases.bin)
  verl.trainer.ppo.core_algos.get_policy_loss_fn gspo / cispo / sapo / gpg / dppo_* / clip_cov / kl_cov / geo_mean
                                                           (loss_modes.bin; `--only loss_modes` writes that file alone)
and torch.autograd for d(loss)/d(logp) and d(loss)/d(entropy) of loss = pg_loss - entropy_coeff * entropy_agg
(verl's actor objective, verl/workers/utils/losses.py ppo_loss).

verl is pinned to 0.9.1 (issue 37; its agg_loss / compute_policy_loss_vanilla / compute_grpo_outcome_advantage give
the same values as 0.7.1's and 0.8.0's; its rollout_corr_helper counts rollout_is_seq_fraction_high/low from the raw,
pre-truncation sequence means and refuses k1 bounds with lower > upper, which 0.8.0 did not). verl's full dependency set is huge (vllm, ray[default], ...), so this
script installs exactly the pins of requirements-verl.txt with --no-deps into ~/.cache/dapo/verl-deps (or $DAPO_VERL_DEPS; outside the repository) and imports from there;
torch and numpy come from the environment.

File format (read by tests/unit/dapo_fixture.h): magic b"DAPOFX01", u32 count, then per tensor:
  name (48 bytes, NUL padded), u32 dtype (1 = f32, 2 = i32, 3 = f64), u32 n (elements), n * element.
"""
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEPS = os.environ.get("DAPO_VERL_DEPS", os.path.expanduser("~/.cache/dapo/verl-deps"))
OUT = os.path.join(ROOT, "tests", "data", "dapo")


def import_verl():
    if DEPS not in sys.path:
        sys.path.insert(0, DEPS)
    try:
        import verl.trainer.ppo.core_algos  # noqa: F401
    except ImportError:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", DEPS,
                               "-r", os.path.join(HERE, "requirements-verl.txt")])
        import importlib
        importlib.invalidate_caches()
        for name in [m for m in sys.modules if m == "verl" or m.startswith("verl.")]:
            del sys.modules[name]   # drop a half-imported verl from the failed attempt
    from verl.trainer.ppo import core_algos
    from verl.workers.config import ActorConfig
    import verl
    return core_algos, ActorConfig, verl.__version__


class Writer:
    def __init__(self):
        self.items = []

    def add(self, name, values, dtype):
        import numpy as np
        assert len(name) < 48, name
        arr = np.asarray(values).reshape(-1)
        code, fmt = {"f32": (1, "<f4"), "i32": (2, "<i4"), "f64": (3, "<f8")}[dtype]
        self.items.append((name, code, arr.astype(fmt).tobytes(), arr.size))

    def save(self, path):
        with open(path, "wb") as f:
            f.write(b"DAPOFX01")
            f.write(struct.pack("<I", len(self.items)))
            for name, code, data, n in self.items:
                f.write(name.encode().ljust(48, b"\0"))
                f.write(struct.pack("<II", code, n))
                f.write(data)
        print(f"wrote {path} ({len(self.items)} tensors, {os.path.getsize(path)} bytes)")


MODES = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]


def make_inputs(seed, B, T, empty_row):
    import torch
    g = torch.Generator().manual_seed(seed)
    old = -2.0 + torch.randn(B, T, generator=g)
    kind = torch.randint(0, 5, (B, T), generator=g)
    delta = torch.where(kind == 0, 0.05 * torch.randn(B, T, generator=g),
            torch.where(kind == 1, 0.5 * torch.randn(B, T, generator=g),
            torch.where(kind == 2, torch.randn(B, T, generator=g),
            torch.where(kind == 3, 0.2 * torch.randn(B, T, generator=g), 3.0 * torch.randn(B, T, generator=g)))))
    logp = old + delta
    # the log-ratio clamp: beyond +-20, and exactly on both bounds (exact in fp32)
    logp[0, 1], old[0, 1] = -3.0, -30.0      # d = +27 -> clamped
    logp[1, 2], old[1, 2] = -31.0, -1.0      # d = -30 -> clamped
    logp[2, 0], old[2, 0] = -10.0, -30.0     # d = +20 exactly
    logp[3, 3], old[3, 3] = -20.0, 0.0       # d = -20 exactly
    # where the unclipped branch wins (A > 0, tiny ratio) the clamp decides the gradient:
    logp[0, 3], old[0, 3] = -20.0, 0.0       # d = -20 exactly: torch.clamp passes the gradient (closed interval)
    logp[0, 4], old[0, 4] = -26.0, -1.0      # d = -25: clamped, gradient cut
    adv_row = torch.tensor([1.5, -0.7, 0.0, -2.0, 0.9, -1.1, 0.3][:B])
    adv = adv_row[:, None].expand(B, T).clone()
    adv[4 % B, :] += 0.01 * torch.arange(T)  # per-token variation is allowed too
    lengths = torch.randint(2, T + 1, (B,), generator=g)
    lengths[0] = T                            # the clamp tokens above count
    lengths[1] = T                            # at least one full-width row (the -norm horizon)
    if empty_row:
        lengths[B - 1] = 0
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    ent = 3.0 * torch.rand(B, T, generator=g)
    return logp.float(), old.float(), adv.float(), mask, ent.float()


def loss_cases(core_algos, ActorConfig, w):
    import torch
    cases = []
    for seed, B, T, empty in [(1, 5, 9, False), (2, 6, 7, True), (3, 7, 12, False)]:
        for mode in MODES:
            for glob in (False, True):
                for coeff, c in ((0.0, 10.0), (0.01, 3.0)):
                    cases.append((seed, B, T, empty, mode, glob, coeff, c))
    for ci, (seed, B, T, empty, mode, glob, coeff, c) in enumerate(cases):
        logp, old, adv, mask, ent = make_inputs(seed, B, T, empty)
        cfg = ActorConfig(strategy="fsdp", clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.28,
                          clip_ratio_c=c, ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=1,
                          use_dynamic_bsz=False, rollout_n=1)
        if glob:
            info = dict(dp_size=2, batch_num_tokens=int(mask.sum().item() * 2 + 3),
                        global_batch_size=2 * B + 1, loss_scale_factor=16)
        else:
            info = {}
        cfg.global_batch_info.clear()   # verl fills this dict in place (workers/utils/losses.py)
        cfg.global_batch_info.update(info)
        lp = logp.clone().requires_grad_(True)
        en = ent.clone().requires_grad_(True)
        pg_loss, m = core_algos.compute_policy_loss_vanilla(old_log_prob=old, log_prob=lp, advantages=adv,
                                                            response_mask=mask, loss_agg_mode=mode, config=cfg)
        ent_agg = core_algos.agg_loss(loss_mat=en, loss_mask=mask, loss_agg_mode=mode, **info)
        loss = pg_loss - coeff * ent_agg
        loss.backward()
        p = f"c{ci}/"
        w.add(p + "shape", [B, T], "i32")
        w.add(p + "mode", [MODES.index(mode)], "i32")
        w.add(p + "params", [0.2, 0.28, c, coeff, info.get("dp_size", 0), info.get("batch_num_tokens", 0),
                             info.get("global_batch_size", 0), info.get("loss_scale_factor", 0)], "f64")
        w.add(p + "logp", logp, "f32")
        w.add(p + "old_logp", old, "f32")
        w.add(p + "adv", adv, "f32")
        w.add(p + "mask", mask.int(), "i32")
        w.add(p + "entropy", ent, "f32")
        w.add(p + "out", [pg_loss.item(), m["actor/pg_clipfrac"], m["actor/pg_clipfrac_lower"], m["actor/ppo_kl"],
                          ent_agg.item(), loss.item()], "f64")
        w.add(p + "dlogp", lp.grad, "f32")
        w.add(p + "dentropy", en.grad, "f32")
    w.add("n_cases", [len(cases)], "i32")


LOSS_MODES = ["vanilla", "gspo", "cispo", "sapo", "gpg", "dppo_tv", "dppo_kl", "clip_cov", "kl_cov",
              "geo_mean"]   # common/dapo/loss.h LossMode order
# clip_cov / kl_cov's knobs in the fixtures: ratios large enough that several tokens are picked; clip_cov's band keeps
# the candidates no more than it zeroes, so verl's torch.randperm decides nothing (loss_mode_cases asserts it)
COV_KNOBS = dict(clip_cov_ratio=0.3, clip_cov_lb=0.3, clip_cov_ub=2.0, kl_cov_ratio=0.15, ppo_kl_coef=0.1)


def clip_cov_candidates(logp, old, adv, mask, knobs):
    """clip_cov's candidate count and the number it zeroes (verl's compute_policy_loss_clip_cov, without the draw)."""
    import torch
    ratio = torch.exp(logp - old)
    l1, l2 = -adv * ratio, -adv * torch.clamp(ratio, 1 - 0.2, 1 + 0.28)
    mm = lambda x: (x * mask).sum() / (mask.sum() + 1e-8)
    cov = (adv - mm(adv)) * (logp - mm(logp))
    cand = (cov > knobs["clip_cov_lb"]) & (cov < knobs["clip_cov_ub"]) & (mask > 0) & ~((l2 > l1) & (mask > 0))
    return int(cand.sum().item()), max(int(knobs["clip_cov_ratio"] * mask.sum().item()), 1)


def loss_mode_cases(core_algos, ActorConfig, w):
    """verl's policy losses (get_policy_loss_fn: vanilla, gspo, cispo, sapo, gpg, dppo_tv, dppo_kl, clip_cov, kl_cov,
    geo_mean) on make_inputs' cases, every aggregation mode, without and with the global batch info, rollout-correction weights and the KL loss
    (use_kl_loss: kl_penalty against a reference's log-probs, kl_loss_coef 0.05, verl's ppo_loss), with torch
    autograd's d(loss)/d(logp) and d(loss)/d(entropy) (loss_modes.bin). Metrics a mode does not report are NaN."""
    import torch
    from verl.workers.config.actor import PolicyLossConfig
    g = torch.Generator().manual_seed(11)
    n = 0
    kl_names = ["low_var_kl", "k1+", "abs", "mse", "k3+", "kl"]
    for lmode in LOSS_MODES:
        for seed, B, T, empty in [(1, 5, 9, False), (2, 6, 7, True)]:
            for mode in MODES:
                # geo_mean ignores the global batch info (torch.mean over the rows): its second variant has none
                variants = ((False, False, 0.0), (lmode != "geo_mean", True, 0.01))
                for glob, isw, coeff in variants:
                    logp, old, adv, mask, ent = make_inputs(seed, B, T, empty)
                    if lmode in ("gspo", "clip_cov", "kl_cov", "geo_mean"):
                        # gspo: the sequences' mean log-ratios below its clamp at 10 but mixed; the others take exp(d)
                        # unclamped: keep it finite
                        logp = old + (logp - old).clamp(-4.0, 4.0)
                    if lmode == "clip_cov":
                        nc, nz = clip_cov_candidates(logp, old, adv, mask, COV_KNOBS)
                        assert 0 < nc <= nz, (nc, nz)
                    cfg = ActorConfig(strategy="fsdp", clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.28,
                                      clip_ratio_c=10.0, ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=1,
                                      use_dynamic_bsz=False, rollout_n=1,
                                      policy_loss=PolicyLossConfig(loss_mode=lmode, **COV_KNOBS))
                    info = dict(dp_size=2, batch_num_tokens=int(mask.sum().item() * 2 + 3), global_batch_size=2 * B + 1,
                                loss_scale_factor=16) if glob else {}
                    cfg.global_batch_info.clear()
                    cfg.global_batch_info.update(info)
                    weights = (0.5 + torch.rand(B, T, generator=g)) if isw else None
                    ref = logp + 0.3 * torch.randn(B, T, generator=g)
                    kl_name = kl_names[n % len(kl_names)] if isw else ""      # the KL loss with the second variant
                    lp = logp.clone().requires_grad_(True)
                    en = ent.clone().requires_grad_(True)
                    fn = core_algos.get_policy_loss_fn(lmode)
                    pg_loss, m = fn(old_log_prob=old, log_prob=lp, advantages=adv, response_mask=mask,
                                    loss_agg_mode=mode, config=cfg, rollout_is_weights=weights)
                    ent_agg = core_algos.agg_loss(loss_mat=en, loss_mask=mask, loss_agg_mode=mode, **info)
                    loss = pg_loss - coeff * ent_agg     # verl's ppo_loss (workers/utils/losses.py): then + KL
                    kl_loss = torch.tensor(0.0)
                    if kl_name:
                        kld = core_algos.kl_penalty(logprob=lp, ref_logprob=ref, kl_penalty=kl_name)
                        kl_loss = core_algos.agg_loss(loss_mat=kld, loss_mask=mask, loss_agg_mode=mode, **info)
                        loss = loss + kl_loss * 0.05
                    loss.backward()
                    nan = float("nan")
                    p = f"m{n}/"
                    w.add(p + "shape", [B, T], "i32")
                    w.add(p + "mode", [MODES.index(mode), LOSS_MODES.index(lmode)], "i32")
                    w.add(p + "params", [0.2, 0.28, 10.0, coeff, info.get("dp_size", 0),
                                         info.get("batch_num_tokens", 0), info.get("global_batch_size", 0),
                                         info.get("loss_scale_factor", 0), cfg.tau_pos, cfg.tau_neg]
                          + [COV_KNOBS[k] for k in ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub", "kl_cov_ratio",
                                                    "ppo_kl_coef")], "f64")
                    w.add(p + "logp", logp, "f32")
                    w.add(p + "old_logp", old, "f32")
                    w.add(p + "adv", adv, "f32")
                    w.add(p + "mask", mask.int(), "i32")
                    w.add(p + "entropy", ent, "f32")
                    w.add(p + "is_weight", weights if isw else torch.zeros(0), "f32")
                    w.add(p + "ref", ref, "f32")
                    w.add(p + "kl", [KL_NAMES.index(kl_name) if kl_name else -1], "i32")
                    w.add(p + "kl_loss", [kl_loss.item()], "f64")
                    w.add(p + "out", [pg_loss.item(), m.get("actor/pg_clipfrac", nan),
                                      m.get("actor/pg_clipfrac_lower", nan), m.get("actor/ppo_kl", nan),
                                      ent_agg.item(), loss.item()], "f64")
                    w.add(p + "dlogp", lp.grad, "f32")
                    w.add(p + "dentropy", en.grad, "f32")
                    n += 1
    w.add("n_cases", [n], "i32")


def grpo_cases(core_algos, w):
    import numpy as np
    import torch
    g = torch.Generator().manual_seed(7)
    sizes = [4, 4, 1, 3, 2, 5, 4, 4]
    rewards = []
    for gi, n in enumerate(sizes):
        if gi == 6:
            rewards += [1.0] * n          # all equal: exactly 0 in verl too
        elif gi == 7:
            rewards += [-1.0] * n
        else:
            base = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0)
            pen = torch.where(torch.rand(n, generator=g) < 0.3, -torch.rand(n, generator=g), torch.zeros(n))
            rewards += (base + pen).tolist()
    R = torch.tensor(rewards, dtype=torch.float32)
    B, T = len(rewards), 6
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    tlr = torch.zeros(B, T)
    tlr[torch.arange(B), lengths - 1] = R      # the DAPO reward manager puts the reward on the last token
    index = np.array([f"uid{gi}" for gi, n in enumerate(sizes) for _ in range(n)], dtype=object)
    w.add("grpo/sizes", sizes, "i32")
    w.add("grpo/reward", R, "f32")
    for norm in (True, False):
        adv, _ = core_algos.compute_grpo_outcome_advantage(token_level_rewards=tlr, response_mask=mask,
                                                           index=index, norm_adv_by_std_in_grpo=norm)
        per_resp = adv[torch.arange(B), lengths - 1]
        assert torch.all((adv == per_resp[:, None]) | (mask == 0))
        w.add("grpo/adv_norm" if norm else "grpo/adv_nonorm", per_resp, "f32")


ESTIMATORS = ["grpo", "rloo", "opo", "gpg", "grpo_passk", "reinforce_plus_plus", "reinforce_plus_plus_baseline"]


def estimator_cases(core_algos, w):
    """verl's outcome advantage estimators (get_adv_estimator_fn; common/dapo/advantages.h AdvEstimator order) on
    groups of several sizes, rewards on each response's last counted token (as verl's reward managers put them),
    response masks of several lengths (one group with no counted token left out for opo: verl gives NaN there), with
    and without norm_adv_by_std_in_grpo (estimators.bin)."""
    import numpy as np
    import torch
    from verl.trainer.config import AlgoConfig
    g = torch.Generator().manual_seed(13)
    n = 0
    for est in ESTIMATORS:
        for seed in range(3):
            sizes = [4, 4, 3, 5, 2, 4] + ([1] if est != "grpo_passk" else [2])
            rewards = []
            for gi, k in enumerate(sizes):
                while True:   # distinct values per group for grpo_passk (torch.topk's tie order is unspecified)
                    r = (torch.where(torch.rand(k, generator=g) < 0.5, -1.0, 1.0)
                         + torch.where(torch.rand(k, generator=g) < 0.4, -torch.rand(k, generator=g), torch.zeros(k)))
                    if gi == 1 and seed == 0 and est != "grpo_passk":
                        r = torch.ones(k)           # all equal
                    if est != "grpo_passk" or len(set(r.tolist())) == k:
                        break
                rewards += r.tolist()
            R = torch.tensor(rewards, dtype=torch.float32)
            B, T = len(rewards), 9
            lengths = torch.randint(1, T + 1, (B,), generator=g)
            mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
            tlr = torch.zeros(B, T)
            tlr[torch.arange(B), lengths - 1] = R
            index = np.array([f"uid{gi}" for gi, k in enumerate(sizes) for _ in range(k)], dtype=object)
            for norm in (True, False):
                cfg = AlgoConfig(adv_estimator=est, norm_adv_by_std_in_grpo=norm, gamma=1.0)
                fn = core_algos.get_adv_estimator_fn(est)
                adv, _ = fn(token_level_rewards=tlr, response_mask=mask, index=index, config=cfg,
                            norm_adv_by_std_in_grpo=norm)
                per = adv[torch.arange(B), lengths - 1]
                assert torch.allclose(adv, per[:, None] * mask, atol=1e-6), est   # one value per response
                p = f"e{n}/"
                w.add(p + "est", [ESTIMATORS.index(est), int(norm)], "i32")
                w.add(p + "sizes", sizes, "i32")
                w.add(p + "reward", R, "f32")
                w.add(p + "tokens", lengths.int(), "i32")
                w.add(p + "adv", per, "f32")
                n += 1
    w.add("n_cases", [n], "i32")


KL_REWARD = [("grpo", 1.0), ("rloo", 1.0), ("opo", 1.0), ("gpg", 1.0), ("grpo_passk", 1.0), ("reinforce_plus_plus", 1.0),
             ("reinforce_plus_plus", 0.9), ("reinforce_plus_plus_baseline", 1.0)]


def verl_apply_kl_penalty(core_algos):
    """verl's apply_kl_penalty, its own source text (trainer/ppo/ray_trainer.py) executed: importing that module needs
    Ray and torchdata, which the fixtures do not install."""
    import ast
    import torch
    import verl.trainer.ppo as ppo
    from verl.utils.torch_functional import masked_mean
    path = os.path.join(os.path.dirname(ppo.__file__), "ray_trainer.py")
    src = open(path).read()
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "apply_kl_penalty")
    from verl import DataProto
    ns = {"core_algos": core_algos, "torch": torch, "masked_mean": masked_mean, "DataProto": DataProto}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), path, "exec"), ns)
    return ns["apply_kl_penalty"]


def kl_reward_cases(core_algos, w):
    """algorithm.use_kl_in_reward: verl's apply_kl_penalty (token_level_scores - beta kl_penalty(old, ref) x mask, with a
    fixed and an adaptive controller) then the estimator (get_adv_estimator_fn; reinforce_plus_plus also at gamma 0.9),
    on groups of several sizes with variable response lengths and one overlong-masked response (kl_reward.bin)."""
    import numpy as np
    import torch
    from verl import DataProto
    from verl.trainer.config import AlgoConfig
    apply_kl_penalty = verl_apply_kl_penalty(core_algos)
    g = torch.Generator().manual_seed(19)
    kl_names = ["kl", "low_var_kl", "abs"]
    n = 0
    for ci, (est, gamma) in enumerate(KL_REWARD):
        for adaptive in (False, True):
            sizes = [4, 3, 4, 2]
            B, T = sum(sizes), 9
            lengths = torch.randint(1, T + 1, (B,), generator=g)
            mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
            mask[5] = 0.0                               # an overlong-filtered response: no counted token
            score = torch.where(torch.rand(B, generator=g) < 0.5, 0.0, 1.0) + 0.1 * torch.rand(B, generator=g)
            tls = torch.zeros(B, T)
            tls[torch.arange(B), lengths - 1] = score   # verl's reward managers: the last response token
            old = -2.0 + torch.randn(B, T, generator=g)
            ref = old + 0.4 * torch.randn(B, T, generator=g)
            kl_name = kl_names[n % len(kl_names)]
            ctrl = (core_algos.AdaptiveKLController(init_kl_coef=0.05, target_kl=0.02, horizon=100) if adaptive
                    else core_algos.FixedKLController(kl_coef=0.05))
            data = DataProto.from_dict(tensors={"response_mask": mask, "token_level_scores": tls, "old_log_probs": old,
                                                "ref_log_prob": ref})
            data, metrics = apply_kl_penalty(data, kl_ctrl=ctrl, kl_penalty=kl_name)
            tlr = data.batch["token_level_rewards"]
            index = np.array([f"uid{gi}" for gi, k in enumerate(sizes) for _ in range(k)], dtype=object)
            cfg = AlgoConfig(adv_estimator=est, norm_adv_by_std_in_grpo=True, gamma=gamma)
            adv, _ = core_algos.get_adv_estimator_fn(est)(token_level_rewards=tlr, response_mask=mask, index=index,
                                                           config=cfg, norm_adv_by_std_in_grpo=True)
            p = f"r{n}/"
            w.add(p + "est", [ESTIMATORS.index(est), int(adaptive), KL_NAMES.index(kl_name)], "i32")
            w.add(p + "params", [gamma, 0.05, 0.02, 100.0], "f64")     # gamma, kl_coef, target_kl, horizon
            w.add(p + "sizes", sizes, "i32")
            w.add(p + "lengths", lengths.int(), "i32")
            w.add(p + "mask", mask.int(), "i32")
            w.add(p + "score", score, "f32")
            w.add(p + "old", old, "f32")
            w.add(p + "ref", ref, "f32")
            w.add(p + "adv", adv, "f32")
            w.add(p + "out", [metrics["actor/reward_kl_penalty"], metrics["actor/reward_kl_penalty_coeff"], ctrl.value,
                              tlr.sum(-1).mean().item()], "f64")
            n += 1
    w.add("n_cases", [n], "i32")


KL_NAMES = ["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "kl+", "k1+", "abs+", "mse+", "k2+", "low_var_kl+", "k3+"]


def kl_cases(core_algos, w):
    """verl's kl_penalty per token (values, and torch autograd's d/d logprob) for each name dapo accepts, on log-probs
    that reach both of low_var_kl's clamps and x = 0 exactly (kl_cases.bin)."""
    import torch
    g = torch.Generator().manual_seed(17)
    logp = -3.0 + 2.0 * torch.randn(200, generator=g)
    ref = logp + torch.where(torch.rand(200, generator=g) < 0.8, 0.5 * torch.randn(200, generator=g),
                             8.0 * torch.randn(200, generator=g))
    ref[0], logp[0] = -2.0, -2.0          # x = 0
    ref[1], logp[1] = -1.0, -30.0         # ref - logp = 29: beyond the +-20 clamp
    ref[2], logp[2] = -30.0, -1.0         # -29
    ref[3], logp[3] = -5.0, -17.0         # e^12 - 13: past the value clamp at 10
    w.add("logp", logp, "f32")
    w.add("ref", ref, "f32")
    for i, name in enumerate(KL_NAMES):
        lp = logp.clone().requires_grad_(True)
        v = core_algos.kl_penalty(lp, ref, name)
        v.sum().backward()
        w.add(f"k{i}/value", v.detach(), "f32")
        w.add(f"k{i}/grad", lp.grad, "f32")
    w.add("n_names", [len(KL_NAMES)], "i32")


RC_KEYS = ["training_ppl", "training_log_ppl", "rollout_ppl", "rollout_log_ppl", "kl", "k3_kl", "log_ppl_diff",
           "log_ppl_abs_diff", "log_ppl_diff_max", "log_ppl_diff_min", "ppl_ratio", "chi2_token", "chi2_seq"]


def rollout_corr_cases(core_algos, ActorConfig, w):
    """verl's compute_offpolicy_metrics and compute_rollout_correction_weights (TIS, token and sequence), and
    the vanilla policy loss with those weights (pg_losses * rollout_is_weights) with its autograd gradient."""
    import torch
    from verl.trainer.ppo import rollout_corr_helper as rch
    g = torch.Generator().manual_seed(5)
    n = 0
    for B, T, empty in [(4, 8, False), (6, 5, True), (3, 11, False)]:
        for level in ("token", "sequence"):
            logp = -1.5 + torch.randn(B, T, generator=g)
            rlogp = logp + 0.3 * torch.randn(B, T, generator=g)
            rlogp[0, 0] = logp[0, 0] - 25.0           # beyond the +-20 safety bound
            lengths = torch.randint(1, T + 1, (B,), generator=g)
            if empty:
                lengths[B - 1] = 0
            mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
            met = rch.compute_offpolicy_metrics(old_log_prob=logp, rollout_log_prob=rlogp, response_mask=mask)
            wts, _ = rch.compute_rollout_correction_weights(log_ratio=logp - rlogp, response_mask=mask,
                                                            rollout_is=level, rollout_is_threshold=2.0)
            old = logp + 0.2 * torch.randn(B, T, generator=g)
            adv = torch.randn(B, 1, generator=g).expand(B, T).contiguous()
            cfg = ActorConfig(strategy="fsdp", clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.28,
                              clip_ratio_c=10.0, ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=1,
                              use_dynamic_bsz=False, rollout_n=1)
            lp = logp.clone().requires_grad_(True)
            pg_loss, _ = core_algos.compute_policy_loss_vanilla(old_log_prob=old, log_prob=lp, advantages=adv,
                                                                response_mask=mask, loss_agg_mode="token-mean",
                                                                config=cfg, rollout_is_weights=wts)
            pg_loss.backward()
            pre = f"r{n}/"
            w.add(pre + "shape", [B, T, 0 if level == "token" else 1], "i32")
            w.add(pre + "logp", logp, "f32")
            w.add(pre + "rlogp", rlogp, "f32")
            w.add(pre + "mask", mask.int(), "i32")
            w.add(pre + "metrics", [met[k] for k in RC_KEYS], "f64")
            w.add(pre + "weights", wts, "f32")
            w.add(pre + "old_logp", old, "f32")
            w.add(pre + "adv", adv, "f32")
            w.add(pre + "pg_loss", [pg_loss.item()], "f64")
            w.add(pre + "dlogp", lp.grad, "f32")
            n += 1
    w.add("n_cases", [n], "i32")

# rollout_rs specs of rollout_rs_cases (tests/unit/test_dapo_rollout_corr.c has the same table, in this order)
RS_SPECS = [("token_k1", "0.5_2.0"), ("token_k2", "0.05"), ("token_k3", "0.05"), ("seq_sum_k1", "0.3_3.0"),
            ("seq_sum_k2", "0.5"), ("seq_sum_k3", "0.5"), ("seq_mean_k1", "2.0"), ("seq_mean_k2", "0.05"),
            ("seq_mean_k3", "0.05"), ("seq_max_k2", "0.5"), ("seq_max_k3", "0.5"),
            ("token_k1,seq_mean_k3", "0.5_2.0,0.05"), ("seq_sum_k3,token_k2,token_k2", "0.4")]
RS_OPT_KEYS = ["mean", "max", "min", "fraction_high", "fraction_low", "masked_fraction", "seq_masked_fraction"]
IS_KEYS = ["mean", "max", "min", "ratio_fraction_high", "ratio_fraction_low", "std", "eff_sample_size", "seq_mean",
           "seq_std", "seq_max", "seq_min", "seq_max_deviation", "seq_fraction_high", "seq_fraction_low"]
# (rollout_is, rollout_is_threshold) of the IS cases: TIS and IcePop at both levels
IS_SPECS = [("token", "2.0"), ("sequence", "2.0"), ("token", "0.5_1.5"), ("sequence", "0.2_3.0"), ("token", "1.2")]


def rollout_rs_cases(core_algos, ActorConfig, w):
    """verl's compute_rollout_rejection_mask (every option, chained options) with its metrics; its
    compute_rollout_correction_weights with compute_is_metrics (TIS and IcePop); the decoupled loss as verl's trainer
    composes it (compute_rollout_correction_and_rejection_mask, then compute_policy_loss_vanilla on the modified mask
    with the weights) and verl's bypass-mode loss (compute_policy_loss_bypass_mode, ppo_clip, with rejection), each
    with its autograd gradient."""
    import torch
    from verl.trainer.ppo import rollout_corr_helper as rch
    g = torch.Generator().manual_seed(17)
    n = 0
    for B, T, empty in [(5, 9, False), (6, 7, True), (4, 12, False)]:
        logp = -1.2 + torch.randn(B, T, generator=g)
        rlogp = logp + 0.35 * torch.randn(B, T, generator=g)
        rlogp[1, 1] = logp[1, 1] + 22.0                  # beyond the safety bound
        lengths = torch.randint(1, T + 1, (B,), generator=g)
        if empty:
            lengths[B - 1] = 0
        mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
        old = logp + 0.15 * torch.randn(B, T, generator=g)
        adv = torch.randn(B, 1, generator=g).expand(B, T).contiguous()
        pre = f"c{n}/"
        w.add(pre + "shape", [B, T], "i32")
        w.add(pre + "logp", logp, "f32")
        w.add(pre + "rlogp", rlogp, "f32")
        w.add(pre + "old_logp", old, "f32")
        w.add(pre + "adv", adv, "f32")
        w.add(pre + "mask", mask.int(), "i32")
        for si, (rs, thr) in enumerate(RS_SPECS):
            keep, met = rch.compute_rollout_rejection_mask(log_ratio=logp - rlogp, response_mask=mask, rollout_rs=rs,
                                                           rollout_rs_threshold=thr)
            opts = list(dict.fromkeys(o.strip() for o in rs.split(",")))
            vals = [met["rollout_rs_masked_fraction"], met["rollout_rs_seq_masked_fraction"]]
            for o in opts:
                vals += [met[f"rollout_rs_{o}_{k}"] for k in RS_OPT_KEYS]
            w.add(pre + f"rs{si}/keep", keep.int(), "i32")
            w.add(pre + f"rs{si}/metrics", vals, "f64")
        for ii, (lvl, thr) in enumerate(IS_SPECS):
            wts, met = rch.compute_rollout_correction_weights(log_ratio=logp - rlogp, response_mask=mask,
                                                              rollout_is=lvl, rollout_is_threshold=thr)
            vals = [met["rollout_is_" + k] for k in IS_KEYS] + [met.get("rollout_is_oob_ratio", 0.0)]
            w.add(pre + f"is{ii}/weights", wts, "f32")
            w.add(pre + f"is{ii}/metrics", vals, "f64")
        cfg = ActorConfig(strategy="fsdp", clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.28,
                          clip_ratio_c=10.0, ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=1,
                          use_dynamic_bsz=False, rollout_n=1)
        # decoupled: token TIS 2.0 + token_k1 0.5_2.0 rejection, weights and mask from the proximal (old) policy
        wp, mod_mask, _ = rch.compute_rollout_correction_and_rejection_mask(
            old_log_prob=old, rollout_log_prob=rlogp, response_mask=mask, rollout_is="token", rollout_is_threshold=2.0,
            rollout_rs="token_k1", rollout_rs_threshold="0.5_2.0")
        lp = logp.clone().requires_grad_(True)
        pg, _ = core_algos.compute_policy_loss_vanilla(old_log_prob=old, log_prob=lp, advantages=adv,
                                                       response_mask=mod_mask, loss_agg_mode="token-mean", config=cfg,
                                                       rollout_is_weights=wp.batch["rollout_is_weights"])
        pg.backward()
        w.add(pre + "dec/pg_loss", [pg.item()], "f64")
        w.add(pre + "dec/dlogp", lp.grad, "f32")
        # bypass: old = rollout, ppo_clip, rejection seq_mean_k3 0.08 from the current log-probs, no IS weight
        object.__setattr__(cfg, "policy_loss", {"rollout_correction": {
            "loss_type": "ppo_clip", "rollout_is": "token", "rollout_is_threshold": 2.0,
            "rollout_rs": "seq_mean_k3", "rollout_rs_threshold": 0.08}})
        lp = logp.clone().requires_grad_(True)
        pg, _ = core_algos.compute_policy_loss_bypass_mode(old_log_prob=rlogp, log_prob=lp, advantages=adv,
                                                           response_mask=mask, loss_agg_mode="token-mean", config=cfg)
        pg.backward()
        w.add(pre + "byp/pg_loss", [pg.item()], "f64")
        w.add(pre + "byp/dlogp", lp.grad, "f32")
        n += 1
    w.add("n_cases", [n], "i32")


def sample_cases(w):
    """Kept sets of Hugging Face's own logits warpers (temperature -> top-k -> top-p, the order `generate`
    applies them) and torch's log_softmax of logits / temperature, for common/model/sample.c."""
    import numpy as np
    import torch
    import transformers
    from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                        TopPLogitsWarper)
    g = torch.Generator().manual_seed(11)
    V = 1000
    cases = []
    for T in (0.7, 1.0, 1.3):
        for k in (0, 50, 5):
            for p in (1.0, 0.9, 0.5, 0.3):
                cases.append((T, k, p))
    n = 0
    for (T, k, p) in cases:
        while True:   # redraw rows whose nucleus boundary sits within 1e-4 of top_p (fp32 vs fp64 ties)
            logits = 3.0 * torch.randn(1, V, generator=g)
            x = (logits / T).double()
            if k:
                kth = torch.topk(x, k).values[0, -1]
                x = torch.where(x >= kth, x, torch.tensor(float("-inf"), dtype=torch.float64))
            probs = torch.sort(torch.softmax(x, -1), descending=True).values[0]
            cum = torch.cumsum(probs, 0)
            if p >= 1.0 or torch.min(torch.abs(cum - p)).item() > 1e-4:
                break
        scores = TemperatureLogitsWarper(T)(None, logits.clone())
        if k:
            scores = TopKLogitsWarper(k)(None, scores)
        if p < 1.0:
            scores = TopPLogitsWarper(p)(None, scores)
        kept = torch.isfinite(scores)[0].int()
        logprob = torch.log_softmax(logits / T, dim=-1)[0]
        pre = f"s{n}/"
        w.add(pre + "logits", logits[0], "f32")
        w.add(pre + "params", [T, p, k], "f64")
        w.add(pre + "kept", kept, "i32")
        w.add(pre + "logprob", logprob, "f32")
        n += 1
    w.add("n_cases", [n], "i32")
    w.add("V", [V], "i32")
    return transformers.__version__


def save(name, fill, *args):
    """fill(*args, w) into a new Writer, saved as OUT/name; returns what fill returned."""
    w = Writer()
    r = fill(*args, w)
    w.save(os.path.join(OUT, name))
    return r


def algorithm_family(core_algos, ActorConfig, version):
    """The files of verl's other policy losses, estimators and KL estimators (issue 40), and their PROVENANCE line."""
    import torch
    save("loss_modes.bin", loss_mode_cases, core_algos, ActorConfig)
    save("estimators.bin", estimator_cases, core_algos)
    save("kl_cases.bin", kl_cases, core_algos)
    save("kl_reward.bin", kl_reward_cases, core_algos)
    return (f"loss_modes.bin, estimators.bin, kl_cases.bin, kl_reward.bin: the same verl {version} "
            f"(core_algos.get_policy_loss_fn: vanilla, gspo, cispo, sapo, gpg, dppo_tv, dppo_kl, clip_cov, kl_cov, "
            f"geo_mean, with kl_penalty + agg_loss as workers/utils/losses.py adds the KL loss; agg_loss; "
            f"get_adv_estimator_fn: grpo, rloo, opo, gpg, grpo_passk, reinforce_plus_plus, "
            f"reinforce_plus_plus_baseline; kl_penalty; ray_trainer.apply_kl_penalty with the Fixed and Adaptive KL "
            f"controllers) and torch {torch.__version__} autograd, written with `make_dapo_fixtures.py --only "
            f"loss_modes`.\n")


def main():
    import torch
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    prov = os.path.join(OUT, "PROVENANCE")
    if sys.argv[1:] == ["--only", "loss_modes"]:    # the algorithm family's files alone; PROVENANCE's line replaced
        core_algos, ActorConfig, version = import_verl()
        line = algorithm_family(core_algos, ActorConfig, version)
        kept = [l for l in open(prov).readlines() if not l.startswith("loss_modes.bin")] if os.path.exists(prov) else []
        with open(prov, "w") as f:
            f.write("".join(kept) + line)
        return
    hf_version = save("sample_cases.bin", sample_cases)
    core_algos, ActorConfig, version = import_verl()
    print(f"verl {version} from {os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(core_algos.__file__))))}")
    save("loss_cases.bin", loss_cases, core_algos, ActorConfig)
    save("grpo_cases.bin", grpo_cases, core_algos)
    save("rollout_corr_cases.bin", rollout_corr_cases, core_algos, ActorConfig)
    save("rollout_rs_cases.bin", rollout_rs_cases, core_algos, ActorConfig)
    line = algorithm_family(core_algos, ActorConfig, version)
    with open(prov, "w") as f:
        f.write(f"Written by tests/reference/make_dapo_fixtures.py with verl {version} "
                f"(core_algos.compute_policy_loss_vanilla, agg_loss, compute_grpo_outcome_advantage; "
                f"rollout_corr_helper.compute_offpolicy_metrics, compute_rollout_correction_weights, "
                f"compute_rollout_rejection_mask, compute_rollout_correction_and_rejection_mask; "
                f"core_algos.compute_policy_loss_bypass_mode) "
                f"and torch {torch.__version__} autograd.\n"
                f"sample_cases.bin: transformers {hf_version} TemperatureLogitsWarper / TopKLogitsWarper / "
                f"TopPLogitsWarper kept sets and torch log_softmax.\n" + line)


if __name__ == "__main__":
    main()
