"""ralu: "Reasoning-as-Logic-Units: Scaling Test-Time Reasoning in Large Language Models Through Logic Unit
Alignment" (Li, Xu, Guo, ICML 2025).

Stages: download/preprocess build the evaluation questions (gsm-lite, GSM-Symbolic; GSM8K at full scale)
and the gsm-lite training text; fit_base trains the stand-in LLM (a small GPT-2, mini) or is a no-op when
the config names a real model / endpoint (full); train runs one method over every question with one
sampling seed (batched dialogue, methods.drive) and writes outputs.jsonl; evaluate executes the final
programs in a sandboxed subprocess and scores them against answers.jsonl (which train never reads).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from icml25.core import evidence
from icml25.core.errors import UserError
from icml25.core.io import read_json, write_json
from icml25.core.registry import Claim, ClaimResult, Method, Paper, Study, lazy_hook

PAPER = Paper(
    title="Reasoning-as-Logic-Units: Scaling Test-Time Reasoning in Large Language Models Through Logic Unit Alignment",
    authors="Li, Xu, Guo",
    arxiv="2502.07803",
    code="https://github.com/DeepAccept/RaLU",
)

METHODS = {
    "ralu": Method("ralu", "RaLU (CFG units, rewind, 3 branches)", True,
                   "program -> CFG logic units -> per-unit judge dialogue with rewind-and-correct -> synthesis"),
    "pot": Method("pot", "PoT (direct)", False, "one sampled program, executed"),
    "pot_sc": Method("pot_sc", "PoT self-consistency (k=5)", False, "majority of the executed answers of k programs"),
    "self_refine": Method("self_refine", "whole-program self-refine", False,
                          "one judge call on the whole program; a WRONG reply's fix replaces it"),
    "ralu_line": Method("ralu_line", "RaLU, line-by-line units (ablation)", False,
                        "the same dialogue over one unit per program line"),
    "ralu_norewind": Method("ralu_norewind", "RaLU, no rewind (ablation)", False,
                            "CFG units; the first fix is accepted without re-judging"),
}

METRICS = {
    "accuracy": ("executed-answer accuracy of the final program (majority answer for self-consistency); code "
                 "tasks: pass@1 on base + plus tests (HumanEval+ / MBPP+)", "higher"),
    "base_accuracy": ("code tasks: pass@1 on the base tests only (HumanEval / MBPP)", "higher"),
    "initial_accuracy": ("accuracy (code: base + plus pass@1) of the first sampled program, before any judging",
                         "higher"),
    "tokens": ("generated tokens per problem, all calls", "lower"),
    "prompt_tokens": ("prompt tokens per problem, all calls", "lower"),
    "calls": ("LLM calls per problem", "lower"),
    "units": ("logic units judged per problem", ""),
    "fix_rate": ("share of judged units whose aligned version differs from the original unit", ""),
    "disagree": ("share of problems whose final program's units differ from the aligned units", "lower"),
    "exec_error": ("share of final programs that fail to run or set no `ans`", "lower"),
    "lm_params": ("parameters of the stand-in LLM (0: external model)", ""),
    "lm_train_cpu_s": ("CPU seconds of the stand-in LLM's training (fit_base)", ""),
    "lm_final_loss": ("final training loss of the stand-in LLM", "lower"),
}

BASELINES = ("pot", "pot_sc", "self_refine")
# paper: RaLU minus the best baseline, accuracy points (paper text; Table 1 not copied here)
PAPER_GAIN = {"GSM8K": 1.22, "MATH": 2.07, "HumanEval+": 6.60, "MBPP+": 2.17}
# the full-scale eval sets that are the paper's benchmarks (their column shows that benchmark's gain)
PAPER_SET = {"gsm8k": "GSM8K", "math": "MATH", "humanevalplus": "HumanEval+", "mbppplus": "MBPP+"}


def validate(cfg: dict) -> None:
    sets = cfg["data"]["sets"]
    unknown = [s for s in sets if s not in cfg["data"]["eval_sets"]]
    if not sets or unknown:
        raise UserError(f"ralu: data.sets must name eval sets defined in data.eval_sets; unknown: {unknown}")
    for c in [cfg["claims"]["setting"], *_claim_sets(cfg)]:
        if c not in sets:
            raise UserError(f"ralu: claims.setting / claims.sets name '{c}', not an eval set ({list(sets)})")
    if cfg["llm"]["kind"] not in ("local", "openai"):
        raise UserError(f"ralu: llm.kind must be local or openai, got {cfg['llm']['kind']!r}")
    if int(cfg["ralu"]["max_branches"]) < 0:
        raise UserError("ralu: ralu.max_branches must be >= 0")


# ---- stages ---------------------------------------------------------------------------------------------

def download(cfg, raw_dir: Path) -> None:
    from . import data

    data.download(cfg, raw_dir)


def preprocess(cfg, raw_dir: Path, out_dir: Path) -> None:
    from . import data

    data.preprocess(cfg, raw_dir, out_dir)


def _needs_training(cfg) -> bool:
    return cfg["llm"]["kind"] == "local" and not cfg["llm"].get("path")


def fit_base(cfg, data_dir: Path, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    if not _needs_training(cfg):
        write_json(out_dir / "info.json", {"external": True})
        return
    from icml25.core import runtime

    from . import data, tinylm

    items = data.read_jsonl(data_dir / "train.jsonl")
    # base_per_seed (the DAG's fit_base_seed): this job trains seed base_seed's LM into its own base/seed<N>/;
    # else one LM, seed 0's, in base/seed0/ serves every seed. Either way a run reads base/seed<N or 0>/.
    seed = int(cfg.get("base_seed", 0)) if cfg.get("base_per_seed") else 0
    runtime.seed_everything(seed)
    d = out_dir if cfg.get("base_per_seed") else out_dir / "seed0"
    d.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "info.json", {str(seed): tinylm.train_lm(items, cfg, seed, d)})


def _lm_rows(cfg, seed, base_dir) -> list[dict]:
    if base_dir is None or not (Path(base_dir) / "info.json").exists():
        return []
    info = read_json(Path(base_dir) / "info.json")
    if info.get("external"):
        return [{"setting": "lm", "metric": "lm_params", "value": 0}]
    i = info[str(seed if cfg.get("base_per_seed") else 0)]
    return [{"setting": "lm", "metric": "lm_params", "value": i["n_params"]},
            {"setting": "lm", "metric": "lm_train_cpu_s", "value": i["cpu_s"]},
            {"setting": "lm", "metric": "lm_final_loss", "value": i["curve"][-1][1]}]


def _code_kw(q: dict) -> dict:
    """A code task's solver argument (its entry point); nothing for math (the math path is unchanged)."""
    return {"code": {"entry_point": q["entry_point"]}} if q.get("task") == "code" else {}


def run_method(cfg, method: str, seed: int, questions: list[dict], llm) -> list[dict]:
    """One method over every question (batched); the records written to outputs.jsonl."""
    from . import methods as M

    solver, opt, kw = M.solver_for(method, cfg)
    gens = [solver(q["question"], seed, q["id"], opt, **kw, **_code_kw(q)) for q in questions]
    res = M.drive(gens, llm)
    out = []
    for q, r in zip(questions, res):
        r = {k: v for k, v in r.items() if k != "final_state"}
        out.append({"id": q["id"], "set": q["set"], **r})
    return out


def train(cfg, method, seed, data_dir, base_dir, run_dir) -> dict:
    from . import data
    from .llm import load_llm

    questions = data.read_jsonl(data_dir / "questions.jsonl")  # never answers.jsonl
    llm = load_llm(cfg, base_dir, seed)
    out = run_method(cfg, method, seed, questions, llm)
    data._write_jsonl(run_dir / "outputs.jsonl", out)
    return {"metrics": _lm_rows(cfg, seed, base_dir)}


def vote(answers: list) -> object:
    """Self-consistency: the most frequent executed answer (first seen wins a tie); None when none ran."""
    keyed = [(round(a, 6) if isinstance(a, float) else a) for a in answers if a is not None]
    if not keyed:
        return None
    counts = Counter(keyed)
    best = max(counts.values())
    return next(a for a in keyed if counts[a] == best)


def modal_program(programs: list[str]) -> str:
    """Self-consistency for code (our reading: no executed answer to vote on): the most frequent program up
    to formatting (its AST dump; text when it does not parse); the first seen wins a tie."""
    import ast

    def key(p):
        try:
            return ast.dump(ast.parse(p))
        except (SyntaxError, ValueError, RecursionError):
            return p.strip()

    keys = [key(p) for p in programs]
    counts = Counter(keys)
    best = max(counts.values())
    return programs[next(i for i, k in enumerate(keys) if counts[k] == best)]


def _code_items(cfg, outputs: list[dict], tests: dict) -> dict:
    """Per set, the scored items of code tasks: the final program (the modal one for self-consistency) and
    the first program, each checked by evalplus against the task's tests (codecheck: one sandboxed worker
    per problem, the canonical solution's outputs and times computed once for both programs)."""
    from .codecheck import run_many

    sb = cfg["sandbox"]
    finals = [modal_program(o["programs"]) if len(o["programs"]) > 1 else o["programs"][0] for o in outputs]
    res = run_many([[f, o["initial"]] for f, o in zip(finals, outputs)], [tests[o["id"]] for o in outputs],
                   float(sb.get("code_per_solution_s", 150.0)), int(sb["mem_mb"]),
                   float(sb.get("code_min_time_limit", 1.0)), float(sb.get("code_gt_time_limit_factor", 4.0)),
                   int(sb.get("code_workers", 2)))
    by_set = {}
    for o, (r, ir) in zip(outputs, res):
        by_set.setdefault(o["set"], []).append({
            "acc": float(r["plus"]), "base": float(r["base"]), "init": float(ir["plus"]),
            "err": float(not r.get("loaded", False)), "tok": o["out_tokens"], "ptok": o["in_tokens"],
            "calls": o["calls"], "units": o["units"], "fixed": o["fixed"], "judged": o["judged"],
            "disagree": o["disagree"]})
    return by_set


def score(cfg, outputs: list[dict], answers: dict, tests: dict | None = None) -> list[dict]:
    """Metric rows per set. `answers`: id -> gold answer (math); `tests`: id -> a code task's tests."""
    from .sandbox import run_programs, same_answer

    tests = tests or {}
    code_outputs = [o for o in outputs if o["id"] in tests]
    outputs = [o for o in outputs if o["id"] not in tests]
    sb = cfg["sandbox"]
    flat = [(i, p) for i, o in enumerate(outputs) for p in o["programs"]]
    flat_init = [o["initial"] for o in outputs]
    res = run_programs([p for _, p in flat] + flat_init, float(sb["per_program_s"]), int(sb["mem_mb"]))
    final_res, init_res = res[:len(flat)], res[len(flat):]
    per = [[] for _ in outputs]
    for (i, _), r in zip(flat, final_res):
        per[i].append(r)
    rows, by_set = [], {}
    for o, rs, ir in zip(outputs, per, init_res):
        pred = vote([a for a, _ in rs]) if len(rs) > 1 else rs[0][0]
        gold = answers[o["id"]]
        by_set.setdefault(o["set"], []).append({
            "acc": float(same_answer(pred, gold)), "init": float(same_answer(ir[0], gold)),
            "err": float(pred is None), "tok": o["out_tokens"], "ptok": o["in_tokens"], "calls": o["calls"],
            "units": o["units"], "fixed": o["fixed"], "judged": o["judged"], "disagree": o["disagree"]})
    if code_outputs:
        by_set.update(_code_items(cfg, code_outputs, tests))
    for s, xs in by_set.items():
        n = len(xs)
        mean = lambda k: sum(x[k] for x in xs) / n  # noqa: E731
        rows += [{"setting": s, "metric": "accuracy", "value": 100 * mean("acc")},
                 {"setting": s, "metric": "initial_accuracy", "value": 100 * mean("init")},
                 {"setting": s, "metric": "exec_error", "value": mean("err")},
                 {"setting": s, "metric": "tokens", "value": mean("tok")},
                 {"setting": s, "metric": "prompt_tokens", "value": mean("ptok")},
                 {"setting": s, "metric": "calls", "value": mean("calls")},
                 {"setting": s, "metric": "units", "value": mean("units")}]
        if "base" in xs[0]:
            rows.append({"setting": s, "metric": "base_accuracy", "value": 100 * mean("base")})
        judged = sum(x["judged"] for x in xs)
        if judged:
            rows.append({"setting": s, "metric": "fix_rate", "value": sum(x["fixed"] for x in xs) / judged})
        dis = [x["disagree"] for x in xs if x["disagree"] is not None]
        if dis:
            rows.append({"setting": s, "metric": "disagree", "value": sum(dis) / len(dis)})
    return rows


def evaluate(cfg, method, seed, data_dir, base_dir, run_dir) -> list:
    from . import data

    outputs = data.read_jsonl(run_dir / "outputs.jsonl")
    rows = data.read_jsonl(data_dir / "answers.jsonl")
    answers = {a["id"]: a["answer"] for a in rows}
    tests = {a["id"]: a["tests"] for a in rows if "tests" in a}
    return score(cfg, outputs, answers, tests)


# ---- table ----------------------------------------------------------------------------------------------

def _sets(cfg):
    return list(cfg["data"]["sets"])


def make_table(agg, cfg):
    import pandas as pd

    from icml25.tables import lookup

    def cell(m, s, metric, d=1):
        c = lookup(agg, m, s, metric)
        return "–" if c is None else f"{c[0]:.{d}f} ± {c[1]:.{d}f}"

    main = cfg["claims"]["setting"]
    rows = []
    for m in cfg["methods"]:
        r = {"method": METHODS[m].label}
        for s in _sets(cfg):
            r[f"acc % {s}"] = cell(m, s, "accuracy")
        r[f"first-program acc % {main}"] = cell(m, main, "initial_accuracy")
        r[f"tokens/problem {main}"] = cell(m, main, "tokens", 0)
        r[f"units/problem {main}"] = cell(m, main, "units", 1)
        r[f"fix rate {main}"] = cell(m, main, "fix_rate", 3)
        r[f"disagree {main}"] = cell(m, main, "disagree", 3)
        rows.append(r)
    gain = "; ".join(f"{k} +{v:.2f}" for k, v in PAPER_GAIN.items())
    paper = {"method": "paper: RaLU minus the best baseline (points)"}
    ours = {"method": "ours: RaLU minus the best baseline (points)"}
    for s in _sets(cfg):
        if s in PAPER_SET:
            paper[f"acc % {s}"] = f"{PAPER_SET[s]} +{PAPER_GAIN[PAPER_SET[s]]:.2f}"
        else:
            paper[f"acc % {s}"] = gain if s == main else "–"
        try:
            best = max(_mean(agg, b, s) for b in BASELINES if b in cfg["methods"])
            ours[f"acc % {s}"] = f"{_mean(agg, 'ralu', s) - best:+.1f}"
        except (KeyError, ValueError):
            ours[f"acc % {s}"] = "–"
    rows += [paper, ours]
    lm = {k: lookup(agg, "ralu", "lm", k) for k in ("lm_params", "lm_train_cpu_s", "lm_final_loss")}
    if lm["lm_params"] is not None and lm["lm_params"][0] > 0:
        rows.append({"method": f"stand-in LLM (trained judge, not a pretrained LLM): {lm['lm_params'][0]:,.0f} params, "
                               f"train {lm['lm_train_cpu_s'][0]:.0f} CPU-s, final loss {lm['lm_final_loss'][0]:.3f}"})
    return pd.DataFrame(rows).fillna("")


# ---- claims ---------------------------------------------------------------------------------------------

def _mean(agg, m, s, metric="accuracy"):
    from icml25.tables import need

    return need(agg, m, s, metric)[0]


def _acc(agg, m, s):
    return evidence.seed_values(agg, m, s, "accuracy")


def _gain(agg, a, others, s):
    """Per seed: accuracy of `a` minus the best of `others` (percentage points)."""
    va = _acc(agg, a, s)
    vs = [_acc(agg, o, s) for o in others]
    return {k: va[k] - max(v[k] for v in vs) for k in sorted(set(va).intersection(*[set(v) for v in vs]))}


def _claim_sets(cfg) -> list[str]:
    """The evaluation sets the claims read (`claims.sets`; default: `claims.setting`)."""
    return list(cfg["claims"].get("sets") or [cfg["claims"]["setting"]])


def _worst_gain(agg, a, others, sets):
    """Per seed: the smallest over `sets` of `a` minus the best of `others` (the paper claims the gain on
    every benchmark, so the worst set decides); KeyError when a set has no result (the claim is n.a.)."""
    per = [_gain(agg, a, others, s) for s in sets]
    seeds = sorted(set(per[0]).intersection(*[set(p) for p in per]))
    return {k: min(p[k] for p in per) for k in seeds}


def _claim_text(sets, per_set, margin: str | None) -> str:
    """`set: numbers` for each set, then how the margin is taken (the worst set's when there are several)."""
    worst = f"per seed the worst of the {len(sets)} sets ({', '.join(sets)})" if len(sets) > 1 else ""
    note = "; ".join(x for x in (margin, worst) if x)
    return "; ".join(f"{s}: {per_set(s)}" for s in sets) + (f" (margin: {note})" if note else "")


def claim_beats_pot_refine(agg, cfg):
    sets = _claim_sets(cfg)
    per = _worst_gain(agg, "ralu", ["pot", "self_refine"], sets)
    return ClaimResult.of(_claim_text(sets, lambda s: f"RaLU {_mean(agg, 'ralu', s):.1f}% vs PoT "
                                      f"{_mean(agg, 'pot', s):.1f}%, whole-program refine "
                                      f"{_mean(agg, 'self_refine', s):.1f}%", "RaLU minus the better of the two"),
                          unit="points", per_seed=per)


def claim_best_baseline(agg, cfg):
    sets = _claim_sets(cfg)
    per = _worst_gain(agg, "ralu", list(BASELINES), sets)
    return ClaimResult.of(_claim_text(sets, lambda s: f"RaLU {_mean(agg, 'ralu', s):.1f}% vs PoT "
                                      f"{_mean(agg, 'pot', s):.1f}%, PoT-SC {_mean(agg, 'pot_sc', s):.1f}%, refine "
                                      f"{_mean(agg, 'self_refine', s):.1f}%", "RaLU minus the best baseline"),
                          unit="points", per_seed=per)


def _at_zero(agg, result, a, b, sets):
    """`result`, or n.a. (floor) when arms `a` and `b` solve nothing (0 %) on every set and seed: two arms at
    the floor tie, and the tie says nothing about the ablation (issue 57)."""
    from icml25.tables import floor_verdict

    values = lambda m: [v for s in sets for v in _acc(agg, m, s).values()]  # noqa: E731
    return floor_verdict(result, values(a), values(b), floor=0.0)


def claim_cfg_vs_line(agg, cfg):
    sets = _claim_sets(cfg)
    per = _worst_gain(agg, "ralu", ["ralu_line"], sets)
    return _at_zero(agg, ClaimResult.of(_claim_text(sets, lambda s: f"CFG units {_mean(agg, 'ralu', s):.1f}% vs "
                                                    f"line-by-line {_mean(agg, 'ralu_line', s):.1f}%", None),
                                        unit="points", per_seed=per), "ralu", "ralu_line", sets)


def claim_rewind(agg, cfg):
    sets = _claim_sets(cfg)
    per = _worst_gain(agg, "ralu", ["ralu_norewind"], sets)
    return _at_zero(agg, ClaimResult.of(_claim_text(sets, lambda s: f"rewind {_mean(agg, 'ralu', s):.1f}% vs first "
                                                    f"fix {_mean(agg, 'ralu_norewind', s):.1f}%", None),
                                        unit="points", per_seed=per), "ralu", "ralu_norewind", sets)


def claim_gsm8k(agg, cfg):
    if "gsm8k" not in cfg["data"]["sets"]:
        raise KeyError("GSM8K is a full-scale set (no real LLM offline at mini)")
    per = _gain(agg, "ralu", list(BASELINES), "gsm8k")
    return ClaimResult.of(f"GSM8K: RaLU {_mean(agg, 'ralu', 'gsm8k'):.1f}% (margin: RaLU minus the best baseline)",
                          unit="points", per_seed=per)


STUDY = Study(
    name="ralu",
    paper=PAPER,
    methods=METHODS,
    metrics=METRICS,
    download=download,
    preprocess=preprocess,
    fit_base=fit_base,
    train=train,
    evaluate=evaluate,
    make_table=make_table,
    validate=validate,
    figures=lazy_hook("icml25.studies.ralu.figures", "figures"),
    claims=[
        Claim("ralu_beats_pot_and_refine",
              "Unit-level judging with rewind beats direct PoT and whole-program self-refine with the same model",
              "RaLU above every baseline with each backbone (Table 1)", claim_beats_pot_refine),
        Claim("ralu_beats_best_baseline", "RaLU beats the best baseline (PoT, PoT self-consistency, self-refine)",
              "+1.22 GSM8K, +2.07 MATH, +6.60 HumanEval+, +2.17 MBPP+ over the best baseline", claim_best_baseline),
        Claim("cfg_units_beat_lines", "CFG logic units beat line-by-line units",
              "unit-source ablation (official src/ablation.py, line_by_line)", claim_cfg_vs_line),
        Claim("rewind_beats_first_fix", "Rewind-and-correct beats accepting the first fix",
              "rewind ablation", claim_rewind),
        Claim("gsm8k_gain", "RaLU beats the best baseline on GSM8K with a real LLM",
              "+1.22 points on GSM8K", claim_gsm8k),
    ],
    stand_ins={
        "smoke": "a few gsm-lite items and 2 GSM-Symbolic items, a tiny GPT-2 trained for a few steps; numbers are "
                 "meaningless (tests only).",
        "mini": "gsm-lite (generated word problems whose programs hold loops and branches; new numbers, and a set of "
                "held-out clause combinations) and 20 GSM-Symbolic items (reasoning-gym); the LLM is a small GPT-2 "
                "trained in the pipeline on gsm-lite text for the three roles (program, unit judge, synthesis); the "
                "judge is trained on the issue's four corruptions, so a gain shows the value of unit-level "
                "verification, not an LLM's emergent self-verification.",
        "full": "GSM8K test (1319), hendrycks MATH test (numeric-answer subset), HumanEval+ (164) and MBPP+ (378, "
                "evalplus releases) through an OpenAI-compatible vLLM endpoint serving Qwen2.5-72B-Instruct with token "
                "logprobs (variants: Llama-3.3-70B-Instruct under vLLM, DeepSeek-V3 through its API); code scored by "
                "evalplus 0.3.1 (untrusted_check, MBPP+ input restoration, special oracles) in a sandboxed worker.",
    },
)
