"""tokenswift figures: acceptance against generated length, tokens per verification step, Distinct-1..4."""
from __future__ import annotations


def figures(agg, cfg, out_dir, ctx=None):
    from icml25.core import figures as F

    from .study import METHODS, PAPER_NUMBERS

    methods = [m for m in cfg["methods"] if m in METHODS]
    labels = {m: METHODS[m].label for m in methods}
    colors = F.method_colors(methods, "tokenswift")
    modes = list(cfg["decode"]["modes"])
    out = []
    spec = [m for m in ("tokenswift", "tokenswift_k0", "medusa", "prompt_lookup") if m in methods]
    if ctx is not None and spec:
        frame = ctx.curves()
        if not frame.empty:
            frame = frame.astype({"step": float, "value": float})
            fig, axes = F.panels(len(modes), ncols=2, name="alpha_vs_length",
                                 title="Acceptance rate α against generated length")
            for ax, s in zip(axes, modes):
                F.curves(ax, frame, spec, s, "alpha_cum", labels=labels, colors=colors, xlabel="generated tokens",
                         ylabel="α (cumulative)", title=s)
                if s == "sampled":
                    F.reference(ax, 0.82, label="paper: k=20 at 100K (0.82)", color=colors.get("tokenswift", "black"))
                    F.reference(ax, 0.40, label="paper: k=0 at 100K (0.40)", color=colors.get("tokenswift_k0", "black"))
            F.legend(fig)
            F.caption(fig, "Cumulative acceptance rate α (official definition: accepted draft tokens / (4 × steps)) "
                           "against the number of generated tokens, mean over seeds ± 1 std. TokenSwift reuses the "
                           "top-20 4-grams of the text so far; k=0 and Medusa* (full-KV draft) do not. Dashed: the "
                           "paper's LLaMA3.1-8b values at 100K tokens (a 3M-parameter stand-in here, 2K tokens).")
            out.append(fig)
    if spec:
        fig, axes = F.panels(len(modes), ncols=2, name="tokens_per_step", title="Tokens per verification step")
        for ax, s in zip(axes, modes):
            F.bars(ax, agg, spec, setting=s, metric="tokens_per_step", labels=labels, colors=colors,
                   ylabel="tokens / step", title=s)
        F.legend(fig)
        F.caption(fig, "Tokens committed per full-KV verification (accepted draft tokens + the target's own token), "
                       "mean over seeds ± 1 std, dots: seeds. AR commits 1 per forward; the paper's α 0.84 gives "
                       "4α + 1 ≈ 4.4.")
        out.append(fig)
    pen = [m for m in ("tokenswift", "tokenswift_nopenalty") if m in methods]
    if len(pen) == 2 and "sampled" in modes:
        fig, axes = F.panels(4, ncols=4, name="distinct", title="Distinct-n with and without the contextual penalty")
        for ax, n in zip(axes, (1, 2, 3, 4)):
            F.bars(ax, agg, pen, setting="sampled", metric=f"distinct_{n}", labels=labels, colors=colors,
                   ylabel=f"Distinct-{n}", title=f"Distinct-{n}")
        F.legend(fig)
        F.caption(fig, "Distinct-n (unique n-grams / n-grams) of the sampled generations (min-p 0.1, temperature 1) "
                       f"with the penalty (θ 1.2 over the last {cfg['decode']['window']} tokens) and without; mean over "
                       f"seeds ± 1 std. The paper's Distinct mean: {PAPER_NUMBERS['tokenswift']['distinct']} with, "
                       f"{PAPER_NUMBERS['tokenswift_nopenalty']['distinct']} without.")
        out.append(fig)
    return out
