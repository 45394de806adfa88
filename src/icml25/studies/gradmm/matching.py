"""Gradient matching on `lm_head` (official `last_layer_gradient=True`).

* The target g of a class: the mean over its n real examples of the gradient, w.r.t. lm_head only, of the
  cross-entropy of the last-position logits against the label token (`target_gradient`, autograd per
  example as the official `compute_average_grads`); DP: per-example clipping to norm C, then Gaussian noise
  with the official sigma (`dp_sigma`).
* The distance D = 1 - cos, averaged over lm_head's parameter tensors (official `grad_dist`, loss 'cos').
* Inside ADMM many candidate batches are matched at once; their lm_head gradients are computed in closed
  form, grad_W CE = mean_i (softmax(W h_i + b) - e_y) h_i^T (and mean_i of the bracket for a bias), which
  is what autograd gives (tested), differentiable in the embeddings (the double backward of the paper).
"""
from __future__ import annotations

import math
import re

import numpy as np


def freeze_all_but_lm_head(model) -> list:
    """requires_grad only on the output layer's parameters (as the official LAST_LAYERS = ['lm_head'])."""
    head = model.get_output_embeddings()
    keep = {id(p) for p in head.parameters()}
    for p in model.parameters():
        p.requires_grad_(id(p) in keep)
    params = [p for p in model.parameters() if p.requires_grad]
    assert params, "no lm_head parameters found"
    return params


def head_params(model) -> list:
    head = model.get_output_embeddings()
    return [head.weight] + ([head.bias] if getattr(head, "bias", None) is not None else [])


def last_hidden(model, embeds, attention_mask=None):
    """Final hidden state (after the final norm) at the last position: (N, d)."""
    out = model.base_model(inputs_embeds=embeds, attention_mask=attention_mask)
    return out.last_hidden_state[:, -1, :]


def autograd_head_grad(model, ids_or_embeds, label_id: int, create_graph: bool = False):
    """The official compute_grads_lm: CE of the last-position logits against the label token (mean over the
    batch), differentiated w.r.t. the parameters that require grad (lm_head only after freezing)."""
    import torch
    import torch.nn.functional as F

    if ids_or_embeds.dtype in (torch.long, torch.int64, torch.int32):
        logits = model(input_ids=ids_or_embeds).logits[:, -1, :]
    else:
        logits = model(inputs_embeds=ids_or_embeds).logits[:, -1, :]
    y = torch.full((logits.shape[0],), int(label_id), dtype=torch.long, device=logits.device)
    loss = F.cross_entropy(logits, y)
    return list(torch.autograd.grad(loss, [p for p in model.parameters() if p.requires_grad],
                                    create_graph=create_graph))


def closed_form_head_grad(model, h, label_id: int):
    """lm_head gradients of groups of sequences from their last hidden states h: (G, B, d) ->
    [(G, V, d) weight grad] (+ [(G, V) bias grad]); the CE is the mean over each group's B sequences."""
    import torch

    head = model.get_output_embeddings()
    logits = h @ head.weight.T
    if getattr(head, "bias", None) is not None:
        logits = logits + head.bias
    u = torch.softmax(logits, dim=-1)
    u = u - torch.nn.functional.one_hot(torch.tensor(int(label_id), device=u.device), u.shape[-1]).to(u.dtype)
    b = h.shape[1]
    grads = [torch.einsum("gbv,gbd->gvd", u, h) / b]
    if getattr(head, "bias", None) is not None:
        grads.append(u.mean(dim=1))
    return grads


def cos_distance(grads, target) -> "torch.Tensor":
    """1 - cos per group, averaged over the parameter tensors (official grad_dist, loss 'cos').
    grads: [(G, ...)] ; target: [(...)] -> (G,)."""
    total = 0.0
    for g, t in zip(grads, target):
        gf = g.reshape(g.shape[0], -1)
        tf = t.reshape(1, -1)
        cos = (gf * tf).sum(1) / (gf.norm(dim=1) * tf.norm() + 1e-30)
        total = total + (1 - cos)
    return total / len(target)


# ---- the target gradient and DP -----------------------------------------------------------------------

def dp_sigma(c: float, n: int, epsilon: float, delta: float) -> float:
    """The official dp_add_noise std: the classic Gaussian mechanism for epsilon <= 1, the analytic-style
    formula of the code for epsilon > 1."""
    if 0 <= epsilon <= 1:
        return (c / n) * math.sqrt(2 * math.log(1.25 / delta)) / epsilon
    cc = math.sqrt(math.log(2 / (math.sqrt(16 * delta + 1) - 1)))
    return (cc + math.sqrt(cc ** 2 + epsilon)) * (c / n) / (epsilon * math.sqrt(2))


def clip(grads, c: float):
    """Scale one example's gradient list to total norm <= c (official dp_cliped_per_sample_grads)."""
    import torch

    norm = torch.sqrt(sum((g ** 2).sum() for g in grads))
    f = torch.clamp(c / (norm + 1e-6), max=1.0)
    return [g * f for g in grads]


def target_gradient(model, seqs: list[list[int]], label_id: int, dp: dict | None = None, generator=None):
    """(g, per-example norms before clipping, noise std) for one class; `model` must have only lm_head
    requiring grad. dp: {c, epsilon, delta} or None."""
    import torch

    n = len(seqs)
    total, norms = None, []
    dev = next(model.parameters()).device
    for s in seqs:
        g = [x.detach() for x in autograd_head_grad(model, torch.tensor([s], device=dev), label_id)]
        norms.append(float(torch.sqrt(sum((x ** 2).sum() for x in g))))
        if dp:
            g = clip(g, float(dp["c"]))
        total = [x / n for x in g] if total is None else [t + x / n for t, x in zip(total, g)]
    sigma = 0.0
    if dp:
        sigma = dp_sigma(float(dp["c"]), n, float(dp["epsilon"]), float(dp["delta"]))
        # the noise is drawn on the host (the same draw on every device), then moved
        total = [t + sigma * torch.randn(t.shape, generator=generator, dtype=t.dtype).to(t.device) for t in total]
    return total, norms, sigma


# ---- the banned vocabulary --------------------------------------------------------------------------

_BAD_CHARS = set("*;:_\n-'<>:{}[]()/\\|=+%@~`^#$&")
_WORD = re.compile(r"^[a-z]+(?:['-][a-z]+)*$")


def banned_tokens(tok, vocab_rows: int) -> np.ndarray:
    """Boolean mask of tokens the projection may never pick (official drop_change_line_characters):
    special tokens, rows beyond the tokenizer, tokens with markup characters or longer than 17 characters,
    and tokens that are not one English word once stripped of surrounding punctuation (numbers, bare
    punctuation)."""
    banned = np.ones(int(vocab_rows), dtype=bool)
    special = set(tok.all_special_ids)
    for t in range(min(len(tok), vocab_rows)):
        if t in special:
            continue
        text = tok.decode([t])
        if any(ch in _BAD_CHARS for ch in text) or len(text) > 17:
            continue
        w = re.sub(r"^\W+|\W+$", "", text.lower().strip())
        if _WORD.fullmatch(w):
            banned[t] = False
    return banned
