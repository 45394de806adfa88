"""Detection metrics (the official Evaluator's definitions) and the score fuser."""
from __future__ import annotations

import numpy as np


def roc(pos, neg):
    from sklearn import metrics

    y = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    s = np.r_[np.asarray(pos, float), np.asarray(neg, float)]
    fpr, tpr, thr = metrics.roc_curve(y, s, pos_label=1)
    return fpr, tpr, thr


def tpr_at_fpr(pos, neg, fpr_max: float = 0.01) -> float:
    """TPR at the last ROC point with FPR < fpr_max (official: tpr[np.where(fpr < fpr)[0][-1]])."""
    fpr, tpr, _ = roc(pos, neg)
    return float(tpr[np.where(fpr < fpr_max)[0][-1]])


def auc(pos, neg) -> float:
    from sklearn import metrics

    fpr, tpr, _ = roc(pos, neg)
    return float(metrics.auc(fpr, tpr))


def fit_fuser(x_pos: np.ndarray, x_neg: np.ndarray, seed: int, hidden=(100,), max_iter: int = 2000):
    """StandardScaler + MLPClassifier over the detector features (the official fuser's pipeline type and
    sklearn defaults), fitted on the calibration split only."""
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x = np.r_[np.asarray(x_pos, float), np.asarray(x_neg, float)]
    y = np.r_[np.ones(len(x_pos)), np.zeros(len(x_neg))]
    clf = make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=tuple(hidden), max_iter=int(max_iter),
                                                        random_state=int(seed)))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning at max_iter is reported by n_iter_ instead
        clf.fit(x, y)
    return clf


def fuse(clf, x: np.ndarray) -> np.ndarray:
    return clf.predict_proba(np.asarray(x, float))[:, 1]
