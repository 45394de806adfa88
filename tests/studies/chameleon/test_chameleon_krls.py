"""Faithfulness of Chameleon's weight computation (KRLS on the centred domain affinity)."""
import numpy as np
import pytest

from icml25.studies.chameleon import krls


def _X(seed, k=6, dim=16):
    return np.random.default_rng(seed).normal(size=(k, dim))


@pytest.mark.parametrize("lam", [0.01, 0.1, 1.0, 10.0])
@pytest.mark.parametrize("normalise", [True, False])
def test_krls_matches_eigendecomposition(lam, normalise):
    omega = krls.affinity(_X(0), normalise)
    k = len(omega)
    mu, U = np.linalg.eigh(omega)
    expected = (U ** 2 * (mu / (mu + k * lam))).sum(axis=1)
    raw = krls.krls_raw(omega, lam)
    np.testing.assert_allclose(raw, expected, atol=1e-10)
    # unnormalised scores sum to the effective dimension tr(Omega (Omega + k lam I)^-1) < k
    assert raw.sum() == pytest.approx(np.trace(omega @ np.linalg.inv(omega + k * lam * np.eye(k))))
    assert 0 < raw.sum() < k
    assert krls.krls(omega, lam).sum() == pytest.approx(1.0)


def test_affinity_is_centred_gram_and_trace_normalised():
    X = _X(1)
    om = krls.affinity(X, normalise=False)
    Xc = X - X.mean(axis=0)
    np.testing.assert_allclose(om, Xc @ Xc.T, atol=1e-10)  # KernelCenterer(X X^T) == centred Gram
    on = krls.affinity(X, normalise=True)
    assert np.trace(on) == pytest.approx(len(X))
    # the official formula is scale dependent; the normalised one is not
    np.testing.assert_allclose(krls.krls(krls.affinity(3 * X, True), 0.1), krls.krls(on, 0.1), atol=1e-12)
    assert not np.allclose(krls.krls(krls.affinity(30 * X, False), 10.0), krls.krls(om, 10.0), atol=1e-3)


def test_weight_formulas_follow_official_code():
    S = np.array([0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(krls.pretrain_weights(S), np.exp(1 / S / 5) / np.exp(1 / S / 5).sum())
    np.testing.assert_allclose(krls.finetune_weights(S), np.exp(S / 0.2) / np.exp(S / 0.2).sum())
    # pretraining favours common (low-S) domains, finetuning unique (high-S) ones
    assert np.argmax(krls.pretrain_weights(S)) == 0 and np.argmax(krls.finetune_weights(S)) == 3


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("normalise", [True, False])
def test_duplicating_a_domain_lowers_its_krls_and_raises_its_weight(seed, normalise):
    X = _X(seed, k=5)
    lam = 0.1 if normalise else 10.0
    before = krls.chameleon(X, lam, normalise)
    after = krls.chameleon(np.vstack([X, X[:1]]), lam, normalise)  # domain 0 twice
    assert after["S"][0] == pytest.approx(after["S"][-1])
    assert after["S"][0] < before["S"][0]
    assert after["pretrain"][0] > before["pretrain"][0] and after["pretrain"][-1] > before["pretrain"][0]


def test_unique_orthogonal_domain_gets_highest_score():
    rng = np.random.default_rng(0)
    centre = np.zeros(20)
    centre[:10] = rng.normal(size=10)
    X = centre + 0.1 * rng.normal(size=(6, 20)) * np.r_[np.ones(10), np.zeros(10)]
    odd = np.zeros(20)
    odd[15] = 5.0  # orthogonal to all the others' subspace
    X = np.vstack([X, odd])
    for lam, norm in ((0.1, True), (1.0, True), (10.0, False)):
        r = krls.chameleon(X, lam, norm)
        assert np.argmax(r["S"]) == 6
        assert np.argmin(r["pretrain"]) == 6 and np.argmax(r["finetune"]) == 6


def test_weights_invariant_to_domain_order():
    X = _X(3, k=7)
    perm = np.random.default_rng(0).permutation(7)
    a, b = krls.chameleon(X, 0.1), krls.chameleon(X[perm], 0.1)
    for key in ("S", "pretrain", "finetune"):
        np.testing.assert_allclose(b[key], a[key][perm], atol=1e-12)
