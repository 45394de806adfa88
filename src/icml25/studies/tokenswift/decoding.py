"""Decoders on the lean engine: AR with a KV cache, TokenSwift / Medusa* tree speculation, prompt lookup.

One speculative step (TokenSwift, the official `SpecLong` with tree decoding):
1. draft: one forward of the root (the last sampled token, not yet in the cache) with the *partial* KV
   cache (16 sink tokens + top-scored past positions per layer and KV head by q.k summed over the GQA
   group + all recent tokens, budget B; re-selected over the whole history when the recent tokens fill the
   budget) -> gamma = 1 + K distributions (model head + K heads);
2. candidates: top-10 per head on the fixed tree (official [1,3,3,3], 40 nodes), plus, for the model head's
   top token x, the top-k most frequent 4-grams (x, a, b, c) of the n-gram table as extra branches;
3. verify: one forward of root + tree with the *full* KV cache and the tree attention mask;
4. accept: the target token at every node is selected from the target's distribution at that node
   (penalty context = committed tokens + the node's own path; noise = the stream at the node's absolute
   position, shared by all its children); walk down while a child carries that token; append the target's
   token at the last accepted node (the resampled token, the next root). The accepted rows' KV are
   committed; the n-gram table is updated with the tokens older than the penalty window.
The official variant (sampling per path, penalty over committed tokens only) is `sampling="per_path"`,
`penalty_context="committed"`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .engine import Engine, KVCache
from .heads import all_logits
from .ngram import NGramTable, SuffixIndex
from .sampling import SampleArgs, Stream, choose, processed, window_counts

# the official decoding_tree ([1,3,3,3]): paths of top-k indices per head, 40 nodes
OFFICIAL_TREE = [(0,)] + [(0, i) for i in range(3)] + [(0, i, j) for i in range(3) for j in range(3)] + \
                [(0, i, j, k) for i in range(3) for j in range(3) for k in range(3)]


@dataclass
class SpecConfig:
    draft_kv: str = "partial"          # partial (TokenSwift) | full (Medusa*)
    budget: int = 4096                 # partial KV budget B (retrival_max_budget)
    sink: int = 16
    topk: int = 10
    tree: list = field(default_factory=lambda: list(OFFICIAL_TREE))
    ngram_k: int = 20
    ngram_n: int = 4
    sampling: str = "per_node"         # per_node (exact) | per_path (official)
    penalty_context: str = "per_path"  # per_path (exact) | committed (official)


@dataclass
class Result:
    tokens: list                       # generated tokens (exactly gen_len)
    accepted: int = 0                  # accepted draft tokens
    resampled: int = 0                 # tokens sampled by the target outside a draft (incl. the first)
    steps: int = 0                     # verification steps
    full_forwards: int = 0             # full-KV forwards after prefill
    draft_forwards: int = 0            # partial-KV forwards
    produced: int = 0                  # tokens produced before truncation to gen_len
    draft_slots: int = 0               # gamma x steps (the official alpha's denominator)
    wall: float = 0.0
    trace: list = field(default_factory=list)   # per step: (generated so far, accepted, tree nodes, context)
    commit_log: list = field(default_factory=list)  # (start row, n rows) per step, for the KV check


def _prefill(engine: Engine, prompt, capacity, a: SampleArgs, stream: Stream):
    cache = KVCache(engine, capacity)
    h, ks, vs = engine.forward(torch.tensor(prompt), torch.arange(len(prompt)))
    cache.append(ks, vs)
    V = engine.lm_head.shape[0]
    present = (window_counts(prompt, a.window, V) > 0)[None]
    x = processed(engine.logits(h[-1:]), present, a)
    tok = choose(x, [len(prompt)], a, stream)[0]
    return cache, tok


def autoregressive(engine: Engine, prompt: list, gen_len: int, a: SampleArgs) -> Result:
    """AR decoding with the KV cache (one forward per token, the cache grows by one row per token)."""
    t0 = time.perf_counter()
    V = engine.lm_head.shape[0]
    stream = Stream(a.seed, V, engine.device)
    cache, tok = _prefill(engine, prompt, len(prompt) + gen_len + 8, a, stream)
    seq = list(prompt) + [tok]
    res = Result(tokens=[], resampled=1)
    while len(seq) - len(prompt) < gen_len:
        n = cache.n
        h, ks, vs = engine.forward(torch.tensor([tok]), torch.tensor([n]), *cache.view())
        cache.append(ks, vs)
        res.full_forwards += 1
        present = (window_counts(seq, a.window, V) > 0)[None]
        tok = choose(processed(engine.logits(h), present, a), [n + 1], a, stream)[0]
        seq.append(tok)
        res.resampled += 1
    res.tokens = seq[len(prompt):][:gen_len]
    res.produced = len(seq) - len(prompt)
    res.wall = time.perf_counter() - t0
    res.cache = cache
    return res


class PartialKV:
    """The draft's retrieval cache over the full cache: per layer and KV head the selected positions
    (sorted by score, best first), the history length at the last selection and the recent tokens since."""

    def __init__(self, engine: Engine, budget: int, sink: int):
        self.e, self.B, self.sink = engine, int(budget), int(sink)
        self.base = None
        self.sel = [None] * engine.L
        self.reselect = True

    def key_fn(self, cache: KVCache):
        n = cache.n
        if self.base is None or n - self.base > self.B - self.sink:
            self.base, self.reselect = n, True
        e = self.e
        g = e.nh // e.kvh

        def fn(i, q, k, v):
            K, V = cache.k[i][:, :n], cache.v[i][:, :n]
            if self.reselect:
                hist = K[:, self.sink:self.base]
                score = torch.einsum("ngd,nsd->ns", q[:, -1].view(e.kvh, g, e.hd), hist)
                kk = min(self.B - self.sink, hist.shape[1])
                self.sel[i] = torch.topk(score, kk, dim=-1).indices + self.sink
                if i == e.L - 1:
                    self.reselect = False
            recent = n - self.base
            keep = self.sel[i][:, : max(0, self.B - self.sink - recent)]  # the lowest-scored give way
            sink = torch.arange(min(self.sink, n), device=K.device).expand(e.kvh, -1)
            rec = torch.arange(self.base, n, device=K.device).expand(e.kvh, -1)
            idx = torch.cat([sink, keep, rec], dim=1)
            Kp = torch.gather(K, 1, idx[..., None].expand(-1, -1, e.hd))
            Vp = torch.gather(V, 1, idx[..., None].expand(-1, -1, e.hd))
            KK, VV = torch.cat([Kp, k], 1), torch.cat([Vp, v], 1)
            return KK, VV, torch.ones(q.shape[1], KK.shape[1], dtype=torch.bool, device=K.device)

        return fn


def _node_presence(seq, tok, dep, anc, window, V):
    """[N, V] bool: token in the node's penalty window = the last `window` tokens of seq followed by the
    node's path below the root (anc: ancestor-or-self mask; row 0 is the root, whose path is empty)."""
    base = seq[-window:] if window > 0 else []
    bt = torch.tensor(base, dtype=torch.long)
    c0 = torch.bincount(bt, minlength=V)
    T = len(tok)
    onehot = torch.zeros(T, V)
    onehot[torch.arange(1, T), torch.tensor(tok[1:], dtype=torch.long)] = 1.0
    pc = anc.float() @ onehot  # path counts (root excluded: its row of onehot is zero)
    depth = torch.tensor(dep)
    drops = {}
    for d in sorted(set(dep)):
        k = max(0, len(base) + d - window)
        drops[d] = torch.bincount(bt[:k], minlength=V) if k else torch.zeros(V, dtype=torch.long)
    dc = torch.stack([drops[int(d)] for d in depth])
    return (c0[None] - dc + pc.long()) > 0


def speculative(engine: Engine, heads, prompt: list, gen_len: int, a: SampleArgs, sc: SpecConfig,
                prompt_lookup: bool = False, n_pred: int = 4, trace_kv: bool = False) -> Result:
    """TokenSwift (heads + partial KV + tree + n-gram reuse), Medusa* (draft_kv=full, ngram_k=0) or, with
    prompt_lookup=True, prompt-lookup decoding (one chain of up to n_pred tokens from the suffix index,
    no draft forward)."""
    t0 = time.perf_counter()
    V = engine.lm_head.shape[0]
    stream = Stream(a.seed, V, engine.device)
    gamma = 1 + (len(heads.heads) if heads is not None else 0)
    cache, root = _prefill(engine, prompt, len(prompt) + gen_len + 512, a, stream)
    seq = list(prompt) + [root]
    res = Result(tokens=[], resampled=1)
    table = NGramTable(sc.ngram_n)
    if sc.ngram_k > 0 and not prompt_lookup:
        table.preload(seq[: max(0, len(seq) - a.window)])
    ng_next = max(0, len(seq) - a.window - sc.ngram_n + 1)
    suffix = SuffixIndex() if prompt_lookup else None
    if suffix is not None:
        suffix.extend(seq)
    pkv = PartialKV(engine, sc.budget, sc.sink) if sc.draft_kv == "partial" else None
    step = 0
    while len(seq) - len(prompt) < gen_len:
        n = cache.n  # the root sits at position n
        # ---- candidates: nodes (token, parent, depth)
        tok, par, dep = [root], [-1], [0]
        if prompt_lookup:
            chain = suffix.propose(n_pred)
            for t in chain:
                tok.append(int(t)); par.append(len(tok) - 2); dep.append(dep[-1] + 1)
            slots = n_pred
        else:
            if pkv is not None:
                h, _, _ = engine.forward(torch.tensor([root]), torch.tensor([n]), key_fn=pkv.key_fn(cache))
                res.draft_forwards += 1
            else:
                h, _, _ = engine.forward(torch.tensor([root]), torch.tensor([n]), *cache.view())
                res.full_forwards += 1
            L = all_logits(engine, heads, h)[:, 0]  # [gamma, V]
            present = (window_counts(seq, a.window, V) > 0)[None].expand(gamma, -1)
            top = torch.topk(processed(L, present, a), sc.topk, dim=-1).indices.tolist()
            node_of = {(): 0}
            for path in sc.tree:
                d = len(path)
                tok.append(int(top[d - 1][path[-1]])); par.append(node_of[path[:-1]]); dep.append(d)
                node_of[path] = len(tok) - 1
            if sc.ngram_k > 0:
                firsts = sorted({tok[i] for i in range(len(tok)) if dep[i] == 1})
                for x in firsts:
                    for gram in table.topk(x, sc.ngram_k):
                        p = 0
                        for t in gram:
                            tok.append(int(t)); par.append(p); dep.append(dep[p] + 1)
                            p = len(tok) - 1
            slots = gamma
        T = len(tok)
        # ---- tree mask and verification with the full cache
        anc = torch.zeros(T, T, dtype=torch.bool)
        for i in range(T):
            anc[i, i] = True
            if par[i] >= 0:
                anc[i] |= anc[par[i]]
        mask = torch.cat([torch.ones(T, n, dtype=torch.bool), anc], dim=1)
        h, ks, vs = engine.forward(torch.tensor(tok), torch.tensor([n + d for d in dep]), *cache.view(), mask=mask)
        res.full_forwards += 1
        logits = engine.logits(h)
        if sc.penalty_context == "committed":
            present = (window_counts(seq, a.window, V) > 0)[None].expand(T, -1)
        else:
            present = _node_presence(seq, tok, dep, anc, a.window, V)
        x = processed(logits, present, a)
        children = [[] for _ in range(T)]
        for i in range(1, T):
            children[par[i]].append(i)
        if sc.sampling == "per_node":
            target = choose(x, [n + d + 1 for d in dep], a, stream)

            def depth_acc(v):  # longest accepted chain below v (duplicates: the deepest)
                best, arg = 0, None
                for c in children[v]:
                    if tok[c] == target[v]:
                        dd, _ = depth_acc(c)
                        if dd + 1 > best:
                            best, arg = dd + 1, c
                return best, arg

            chain, v = [], 0
            while True:
                _, c = depth_acc(v)
                if c is None:
                    break
                chain.append(c)
                v = c
            resample = target[v]
        else:  # official: an independent target sample per path position, longest matching prefix
            leaves = [i for i in range(T) if not children[i]]
            best, chain, resample = -1, [], None
            for li, leaf in enumerate(leaves):
                nodes, v = [], leaf
                while v >= 0:
                    nodes.append(v); v = par[v]
                nodes = nodes[::-1]
                t = choose(x[nodes], [n + dep[u] + 1 for u in nodes], a, stream,
                           salts=[1 + step * 1000 + li] * len(nodes))
                m = 0
                while m + 1 < len(nodes) and tok[nodes[m + 1]] == t[m]:
                    m += 1
                if m > best:
                    best, chain, resample = m, nodes[1:m + 1], t[m]
        rows = [0] + chain
        res.commit_log.append((cache.n, len(rows)))
        cache.append(ks, vs, rows=torch.tensor(rows))
        new = [tok[c] for c in chain] + [int(resample)]
        res.trace.append((len(seq) - len(prompt), len(chain), T, n))
        seq.extend(new)
        if suffix is not None:
            suffix.extend(new)
        res.accepted += len(chain)
        res.resampled += 1
        res.steps += 1
        res.draft_slots += slots
        if sc.ngram_k > 0 and not prompt_lookup:
            while ng_next + sc.ngram_n <= len(seq) - a.window:
                table.update(seq[ng_next:ng_next + sc.ngram_n])
                ng_next += 1
        root = int(resample)
        step += 1
    res.produced = len(seq) - len(prompt)
    res.tokens = seq[len(prompt):][:gen_len]
    res.wall = time.perf_counter() - t0
    res.cache = cache
    return res
