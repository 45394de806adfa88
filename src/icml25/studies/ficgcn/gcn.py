"""The plaintext model: a 2-layer GCN with x^2 activation, logits = A (A X W1)^2 W2 (no biases: the encrypted
pipeline would add them as plaintext adds, which change no rotation count). Trained in torch (fit_base)."""
from __future__ import annotations

import numpy as np


def forward_np(A, X, W1, W2) -> np.ndarray:
    H = A @ X @ W1
    return A @ ((H * H) @ W2)


def train_gcn(A, X, labels, train_idx, hidden: int, epochs: int, lr: float, weight_decay: float,
              dropout: float, seed: int):
    """Adam on the training nodes' cross-entropy (full batch); returns (W1, W2) as float64 arrays."""
    import torch

    torch.manual_seed(seed)
    coo = A.tocoo()
    At = torch.sparse_coo_tensor(np.vstack([coo.row, coo.col]), coo.data, coo.shape, dtype=torch.float32,
                                 check_invariants=False).coalesce()
    Xt = torch.tensor(X, dtype=torch.float32)
    y = torch.tensor(labels, dtype=torch.long)
    tr = torch.tensor(train_idx, dtype=torch.long)
    F, C = X.shape[1], int(labels.max()) + 1
    W1 = torch.nn.Parameter(torch.empty(F, hidden))
    W2 = torch.nn.Parameter(torch.empty(hidden, C))
    torch.nn.init.xavier_uniform_(W1, gain=0.5)  # x^2 grows fast: start small
    torch.nn.init.xavier_uniform_(W2, gain=0.5)
    opt = torch.optim.Adam([W1, W2], lr=lr, weight_decay=weight_decay)
    drop = torch.nn.Dropout(dropout)
    for _ in range(epochs):
        opt.zero_grad()
        H = torch.sparse.mm(At, drop(Xt)) @ W1
        out = torch.sparse.mm(At, drop(H * H) @ W2)
        loss = torch.nn.functional.cross_entropy(out[tr], y[tr])
        loss.backward()
        opt.step()
    return W1.detach().double().numpy(), W2.detach().double().numpy()


def accuracy(logits: np.ndarray, labels: np.ndarray, idx: np.ndarray) -> float:
    return float((logits[idx].argmax(1) == labels[idx]).mean())
