"""sparse_drl study glue: the contract hooks over agents.py / sparse.py, the table and the claims."""
from __future__ import annotations

from pathlib import Path

from icml25.core.errors import UserError
from icml25.core.io import write_json
from icml25.core.registry import Claim, ClaimResult, Method, Paper, Study, lazy_hook
from icml25.tables import need

PAPER = Paper(
    title="Network Sparsity Unlocks the Scaling Potential of Deep Reinforcement Learning",
    authors="Ma, Li, Wang, Shen, Bacon, Tao",
    arxiv="2506.17204",
    code="github.com/lilucse/SparseNetwork4DRL (JAX, SimBa + JaxPruner)",
)

METHODS = {
    "sparse": Method("sparse", "sparse (one-shot ERK random mask)", True,
                     "random ERK mask drawn before training; params, grads and AdamW updates masked throughout"),
    "dense": Method("dense", "dense", False, "the same SimBa-lite networks without pruning"),
}

METRICS = {
    "return_auc": ("mean evaluation return over all checkpoints (area under the learning curve / steps)", "higher"),
    "final_return": ("evaluation return at the last checkpoint", "higher"),
    "width": ("hidden width of the scaled network (DQN Q-net, SAC critic)", ""),
    "sparsity": ("global sparsity of the scaled network's weight matrices (0 = dense)", ""),
    "active_params": ("active (unpruned) parameters of the scaled network", ""),
    "total_params": ("all parameters of the scaled network, pruned included", ""),
    "dormant_ratio": ("share of dormant units over every encoder layer's pre-activation outputs, tau = 0.1", "lower"),
    "srank": ("effective rank of the penultimate features, delta = 0.01", "higher"),
    "param_norm": ("L2 norm of all parameters of the scaled network", "lower"),
    "grad_interference": ("mean off-diagonal cosine of per-sample actor-loss gradients (DQN: TD-loss gradients)", "lower"),
    "td_interference": ("mean off-diagonal cosine of per-sample critic TD-loss gradients (ours)", "lower"),
    "grad_norm": ("mean global L2 norm of the scaled network's masked gradient over the last diagnostic interval", ""),
    "reset_probe_ratio": ("new-task fit loss of the trained net / of a freshly reset net (>1: plasticity lost)", "lower"),
    "cpu_seconds": ("process CPU seconds of the run (train + diagnostics)", "lower"),
}


def tasks(cfg) -> dict:
    """Enabled tasks with the shared agent hyperparameters merged under each task's own."""
    return {name: {**cfg["agent"], **spec} for name, spec in cfg["tasks"].items() if spec}


def setting_name(task: str, width: int, sparsity=None, primary: float | None = None) -> str:
    if sparsity is None or primary is None or abs(sparsity - primary) < 1e-9:
        return f"{task}_w{width}"
    return f"{task}_w{width}_s{round(100 * sparsity)}"


def validate(cfg: dict) -> None:
    from .agents import ALGOS

    s = cfg["sparsity"]
    if not (isinstance(s, (int, float)) and 0 <= s < 1):
        raise UserError(f"sparse_drl: sparsity must be in [0, 1), got {s!r}")
    for e in cfg.get("extra_sparsities", []):
        if not 0 <= e < 1:
            raise UserError(f"sparse_drl: extra sparsity {e!r} must be in [0, 1)")
    ts = tasks(cfg)
    if not ts:
        raise UserError("sparse_drl: no task enabled in config/studies/sparse_drl.yaml")
    for name, t in ts.items():
        if t.get("algo") not in ALGOS:
            raise UserError(f"sparse_drl: task '{name}' has unknown algo {t.get('algo')!r}; known: {', '.join(ALGOS)}")
        if not t.get("widths") or any(int(w) < 1 for w in t["widths"]):
            raise UserError(f"sparse_drl: task '{name}' needs positive widths")
        if t["learning_starts"] >= t["total_steps"]:
            raise UserError(f"sparse_drl: task '{name}': learning_starts must be < total_steps")
    for role, name in cfg.get("claims", {}).items():
        if name not in ts:
            raise UserError(f"sparse_drl: claims.{role} names task '{name}', which is not enabled")


def download(cfg: dict, raw_dir: Path) -> None:
    """No data: the environments are simulators. Check they construct (fails fast on a missing package)."""
    from .envs import make_env

    specs = {}
    for name, t in tasks(cfg).items():
        env = make_env(t["env"], 0, t.get("action_repeat", 1))
        specs[name] = {"env": t["env"], "obs_dim": env.spec.obs_dim, "discrete": env.spec.discrete,
                       "n_actions": env.spec.n_actions, "act_dim": env.spec.act_dim}
    write_json(raw_dir / "envs.json", specs)


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    import json

    write_json(out_dir / "envs.json", json.loads((raw_dir / "envs.json").read_text()))


def matched_dense_width(task: dict, spec: dict, sparse_width: int, sparsity: float) -> int:
    """The dense width whose parameter count is closest to the sparse network's active parameters."""
    from .sparse import simba_param_counts

    in_dim, out_dim = _io_dims(task, spec)
    target = simba_param_counts(in_dim, sparse_width, out_dim, _blocks(task), task["expansion"], sparsity)[0]
    best = min(range(1, sparse_width + 1),
               key=lambda w: abs(simba_param_counts(in_dim, w, out_dim, _blocks(task), task["expansion"], None)[0] - target))
    return best


def _blocks(task):
    return task["num_blocks"] if task["algo"] == "dqn" else task["critic_blocks"]


def _io_dims(task, spec):
    if task["algo"] == "dqn":
        return spec["obs_dim"], spec["n_actions"]
    return spec["obs_dim"] + spec["act_dim"], 2 if task["use_cdq"] else 1


def run_plan(cfg: dict, method: str, specs: dict) -> list:
    """[(task, width, sparsity or None, setting)] of one job."""
    plan = []
    for name, t in tasks(cfg).items():
        widths = [int(w) for w in t["widths"]]
        if method == "dense":
            extra = []
            if cfg.get("match_active_params", True):
                m = matched_dense_width(t, specs[name], max(widths), cfg["sparsity"])
                extra = [m] if m not in widths else []
            plan += [(name, w, None, setting_name(name, w)) for w in sorted(widths + extra)]
        else:
            for s in [cfg["sparsity"], *cfg.get("extra_sparsities", [])]:
                plan += [(name, w, float(s), setting_name(name, w, s, cfg["sparsity"])) for w in widths]
    return plan


def train(cfg, method, seed, data_dir, base_dir, run_dir) -> dict:
    import json
    import sys

    from tqdm import tqdm

    from .agents import ALGOS

    specs = json.loads((Path(data_dir) / "envs.json").read_text())
    rows, curves = [], []
    plan = run_plan(cfg, method, specs)
    for name, width, sparsity, setting in tqdm(plan, desc=f"sparse_drl/{method}/seed{seed}", file=sys.stderr):
        t = tasks(cfg)[name]
        res = ALGOS[t["algo"]](t, width, sparsity, seed)
        met = dict(res["metrics"], width=width, sparsity=sparsity or 0.0)
        rows += [{"setting": setting, "metric": k, "value": float(v)} for k, v in met.items()]
        curves += [{"setting": setting, "metric": m, "step": int(s), "value": float(v)} for m, s, v in res["curves"]]
    return {"metrics": rows, "curves": curves}


def evaluate(cfg, method, seed, data_dir, base_dir, run_dir) -> list:
    """Evaluation returns and diagnostics are measured inside training (at checkpoints and at the end)."""
    return []


# ---- table -----------------------------------------------------------------------------------------

def _cell(agg, m, s, metric, digits=1):
    from icml25.tables import fmt, lookup

    c = lookup(agg, m, s, metric)
    return fmt(c[0], c[1], digits) if c else "–"


def make_table(agg, cfg):
    import pandas as pd

    from icml25.tables import lookup

    rows = []
    settings = list(dict.fromkeys(agg.setting))
    for name, t in tasks(cfg).items():
        for m in cfg["methods"]:
            for s in settings:
                if not (s == name or s.startswith(name + "_w")) or lookup(agg, m, s, "width") is None:
                    continue
                w, sp = lookup(agg, m, s, "width")[0], lookup(agg, m, s, "sparsity")[0]
                rows.append({
                    "task": f"{name} ({t['algo'].upper()})", "method": m, "width": int(w), "sparsity": f"{sp:.2f}",
                    "active params": f"{lookup(agg, m, s, 'active_params')[0]:.0f}",
                    "return AUC": _cell(agg, m, s, "return_auc"), "final return": _cell(agg, m, s, "final_return"),
                    "dormant": _cell(agg, m, s, "dormant_ratio", 3), "Srank": _cell(agg, m, s, "srank"),
                    "param norm": _cell(agg, m, s, "param_norm"), "interference": _cell(agg, m, s, "grad_interference", 3),
                    "TD interference": _cell(agg, m, s, "td_interference", 3),
                    "grad norm": _cell(agg, m, s, "grad_norm", 2),
                    "reset probe": _cell(agg, m, s, "reset_probe_ratio", 2),
                })
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame = frame.sort_values(["task", "width", "method"], kind="stable").reset_index(drop=True)
    return frame


# ---- claims ----------------------------------------------------------------------------------------

def _task(cfg, role):
    name = cfg.get("claims", {}).get(role)
    if name is None or name not in tasks(cfg):
        raise KeyError(f"claims.{role}")
    return name, tasks(cfg)[name]


def _metric(cfg):
    return cfg.get("claim_metric", "return_auc")


def _not_learned(agg, name, t):
    """A return comparison between agents that never learned is noise: with `learned_return` set for the
    task (a bar between the random policy's return and a solved task's, fixed in config before any run),
    the return claims are n.a. when no method at any width reaches it."""
    bar = t.get("learned_return")
    if bar is None:
        return None
    rows = agg[(agg.metric == "final_return") & agg.setting.str.startswith(name + "_w")]
    if rows.empty:
        raise KeyError(f"{name}/final_return")
    best = float(rows["mean"].max())
    if best >= float(bar):
        return None
    return ClaimResult("n.a.", f"{name}: not testable here, no agent learned (best final return {best:.1f} < "
                               f"{float(bar):g}, the config's bar for 'learned'); return differences are noise")


# Margins are per seed (dense and sparse jobs run the same seeds; every width of a job shares its seed), so
# every verdict rests on a paired t interval over seeds; with one seed the margin's sign is the old test.

def _sv(agg, m, setting, metric) -> dict[int, float]:
    from icml25.core import evidence

    return evidence.seed_values(agg, m, setting, metric)


def claim_scaling(role):
    """Dense stops improving (or degrades) from the middle to the widest width while sparse keeps improving."""

    def check(agg, cfg):
        from icml25.core import evidence

        name, t = _task(cfg, role)
        skip = _not_learned(agg, name, t)
        if skip:
            return skip
        ws = sorted(int(w) for w in t["widths"])
        if len(ws) < 2:
            return ClaimResult("n.a.", "needs two widths")
        lo, hi, met = ws[-2], ws[-1], _metric(cfg)
        regime = t.get("degradation_params")
        if regime is not None:
            # the paper's dense nets degrade only beyond ~regime parameters: below it the claim's "dense stops
            # improving" half has nothing to show (issue 32: dense w512, 530k params, beat w256 on CartPole)
            dense_hi = need(agg, "dense", f"{name}_w{hi}", "total_params")[0]
            if dense_hi < float(regime):
                return ClaimResult("n.a.", f"{name}: not testable at this scale, below the paper's degradation "
                                           f"regime (widest dense net {dense_hi:,.0f} parameters < {float(regime):,.0f})")
        d_lo, d_hi = need(agg, "dense", f"{name}_w{lo}", met)[0], need(agg, "dense", f"{name}_w{hi}", met)[0]
        s_lo, s_hi = need(agg, "sparse", f"{name}_w{lo}", met)[0], need(agg, "sparse", f"{name}_w{hi}", met)[0]
        curve = lambda m: ", ".join(f"w{w} {need(agg, m, f'{name}_w{w}', met)[0]:.1f}" for w in ws)  # noqa: E731

        def margin(v):
            # v: dense at each width, then sparse at lo and hi. The claim holds when sparse's last gain is > 0
            # and > dense's, and dense "stops improving": its best width is not the widest (or its last gain
            # is <= 0), i.e. its best narrower width is >= its widest. Margin: the smallest of the three gaps
            # (an exact tie of dense's widest and best narrower width reads 0, not holds).
            dense, sl, sh = v[:len(ws)], v[-2], v[-1]
            gs, gd = sh - sl, dense[-1] - dense[-2]
            return min(gs, gs - gd, max(dense[:-1]) - dense[-1])

        cells = [_sv(agg, "dense", f"{name}_w{w}", met) for w in ws]
        cells += [_sv(agg, "sparse", f"{name}_w{lo}", met), _sv(agg, "sparse", f"{name}_w{hi}", met)]
        return ClaimResult.of(f"{name} {met}: dense {curve('dense')}; sparse {curve('sparse')} "
                              f"(w{lo}->w{hi}: dense {d_hi - d_lo:+.1f}, sparse {s_hi - s_lo:+.1f})",
                              unit=f"{met.replace('_', ' ')}, smallest gap", per_seed=evidence.combine(cells, margin))

    return check


def claim_matched(role):
    """The widest sparse network beats the dense network with (about) the same active parameters."""

    def check(agg, cfg):
        from icml25.core import evidence

        name, t = _task(cfg, role)
        skip = _not_learned(agg, name, t)
        if skip:
            return skip
        hi, met = max(int(w) for w in t["widths"]), _metric(cfg)
        s_act = need(agg, "sparse", f"{name}_w{hi}", "active_params")[0]
        dense_rows = agg[(agg.method == "dense") & (agg.metric == "active_params") & agg.setting.str.startswith(name + "_w")]
        if dense_rows.empty:
            raise KeyError(f"dense/{name}/active_params")
        r = dense_rows.iloc[(dense_rows["mean"] - s_act).abs().argsort().iloc[0]]
        dw = int(need(agg, "dense", r.setting, "width")[0])
        s_v, d_v = need(agg, "sparse", f"{name}_w{hi}", met)[0], need(agg, "dense", r.setting, met)[0]
        s_f, d_f = (need(agg, "sparse", f"{name}_w{hi}", "final_return")[0], need(agg, "dense", r.setting, "final_return")[0])
        per_seed = evidence.combine([_sv(agg, "sparse", f"{name}_w{hi}", met), _sv(agg, "dense", r.setting, met)],
                                    lambda v: v[0] - v[1])
        return ClaimResult.of(f"{name}: sparse w{hi} ({s_act:.0f} active) {met} {s_v:.1f} vs dense w{dw} "
                              f"({r['mean']:.0f} params) {d_v:.1f}; final return {s_f:.1f} vs {d_f:.1f}",
                              unit=f"{met.replace('_', ' ')} (sparse - dense)", per_seed=per_seed)

    return check


PATHOLOGIES = (("dormant_ratio", "lower", 3), ("srank", "higher", 1), ("param_norm", "lower", 1),
               ("grad_interference", "lower", 3))


def _rel_gap(good, bad):
    """(good - bad) / (|good| + |bad|): signed, dimensionless, in [-1, 1]; 0 for a tie at 0."""
    den = abs(good) + abs(bad)
    return (good - bad) / den if den > 0 else 0.0


def claim_pathologies(role, only=None):
    """At equal (widest) width the sparse network has lower dormant ratio, higher Srank, smaller parameter
    norm and less gradient interference."""

    def check(agg, cfg):
        from icml25.core import evidence

        name, t = _task(cfg, role)
        hi = max(int(w) for w in t["widths"])
        s = f"{name}_w{hi}"
        parts, gaps = [], []
        for metric, better, dig in PATHOLOGIES:
            if only and metric != only:
                continue
            sv, dv = need(agg, "sparse", s, metric)[0], need(agg, "dense", s, metric)[0]
            good = sv < dv if better == "lower" else sv > dv
            parts.append(f"{metric} {sv:.{dig}f} vs {dv:.{dig}f} ({'ok' if good else 'no'})")
            sign = 1.0 if better == "higher" else -1.0  # sign * (sparse - dense) > 0: sparse is better
            pair = [_sv(agg, "sparse", s, metric), _sv(agg, "dense", s, metric)]
            if only:  # one diagnostic: the gap in its own units
                gaps.append(evidence.combine(pair, lambda v: sign * (v[0] - v[1])))
            else:  # four diagnostics in different units: the relative gap, worst diagnostic
                gaps.append(evidence.combine(pair, lambda v: _rel_gap(sign * v[0], sign * v[1])))
        if only:
            higher = next(b for m, b, _ in PATHOLOGIES if m == only) == "higher"
            unit = f"{only.replace('_', ' ')} ({'sparse - dense' if higher else 'dense - sparse'})"
        else:
            unit = "relative gap, worst diagnostic"
        result = ClaimResult.of(f"{name} w{hi}, sparse vs dense: " + "; ".join(parts), unit=unit,
                                per_seed=evidence.combine(gaps, min))
        if only == "dormant_ratio":  # no dormant unit in either net: the ratio's floor, a tie that cannot speak
            from icml25.tables import floor_verdict

            return floor_verdict(result, pair[0], pair[1], floor=0.0)
        return result

    return check


CLAIMS = []
for role, label in (("primary", "primary task (mini: DQN CartPole)"), ("secondary", "secondary task (mini: SAC Pendulum)")):
    CLAIMS += [
        Claim(f"scaling_{role}", f"{label}: from the middle to the widest width dense stops improving while sparse keeps improving",
              "Fig. 1: dense SimBa saturates/degrades with width, sparse keeps scaling", claim_scaling(role)),
        Claim(f"matched_{role}", f"{label}: the widest sparse net beats the dense net with about the same active parameters",
              "Fig. 1/Sec. 3: wide sparse > narrow dense at equal active parameters", claim_matched(role)),
    ]
    if role == "primary":
        for metric, better, _ in PATHOLOGIES:
            CLAIMS.append(Claim(f"{metric}_{role}", f"{label}: at equal width, sparse has {better} {metric.replace('_', ' ')}",
                                "Sec. 4 (Figs. 5-8): sparsity mitigates dormancy, rank collapse, norm growth, interference",
                                claim_pathologies(role, metric)))
    else:
        CLAIMS.append(Claim(f"pathologies_{role}", f"{label}: at equal width, sparse is better on all four diagnostics",
                            "Sec. 4 (Figs. 5-8)", claim_pathologies(role)))


STUDY = Study(
    name="sparse_drl",
    paper=PAPER,
    methods=METHODS,
    metrics=METRICS,
    download=download,
    preprocess=preprocess,
    train=train,
    evaluate=evaluate,
    make_table=make_table,
    validate=validate,
    figures=lazy_hook("icml25.studies.sparse_drl.figures", "figures"),
    claims=CLAIMS,
    stand_ins={
        "smoke": "a few hundred CartPole/Pendulum steps with tiny widths; numbers are meaningless (tests only).",
        "mini": "DQN on CartPole-v1 (5k env steps, replay ratio 2, widths 16/64/256) instead of SAC on DMC humanoid/dog; "
                "SAC on Pendulum-v1 (6k steps, UTD 1, critic widths 32/128/256) as the continuous path; SimBa-lite "
                "(block expansion 1 instead of 4), batch 64 instead of 256; sparsity 0.8 only; 3 seeds.",
        "full": "SAC with SimBa (expansion 4, critic 2 blocks) on DMC humanoid-run and dog-run, 1M env steps at action "
                "repeat 2, critic widths 256-4096, sparsity 0/0.5/0.8/0.9, 5 seeds, GPU.",
    },
)
