"""OOD metrics in the VOS / Dream-OOD convention: ID is the positive class and scores are higher for ID.

FPR95: the threshold keeps 95% of the ID test samples (ID TPR = 95%); FPR95 = the fraction of OOD samples
at or above it (accepted as ID). AUROC: probability that an ID sample scores above an OOD one (ties
count one half). Both in percent, as the paper reports them. (pytorch-ood's FPRAtTPR uses the opposite
orientation, OOD positive, so it is not used; tests compare this module with sklearn.)
"""
from __future__ import annotations

import numpy as np


def fpr_at_95_tpr(id_scores, ood_scores, tpr: float = 0.95) -> float:
    s_in = np.sort(np.asarray(id_scores, float))
    s_out = np.asarray(ood_scores, float)
    # the largest threshold with at least `tpr` of the ID scores >= it
    k = int(np.floor((1 - tpr) * len(s_in) + 1e-9))
    thr = s_in[min(k, len(s_in) - 1)]
    return float(100.0 * np.mean(s_out >= thr))


def auroc(id_scores, ood_scores) -> float:
    from scipy.stats import rankdata

    s_in, s_out = np.asarray(id_scores, float), np.asarray(ood_scores, float)
    r = rankdata(np.concatenate([s_in, s_out]))
    n1, n0 = len(s_in), len(s_out)
    u = r[:n1].sum() - n1 * (n1 + 1) / 2
    return float(100.0 * u / (n1 * n0))
