"""Token reutilisation: a table of n-gram counts keyed by the first token (the official `N_Gram`, n = 4),
and the suffix index of prompt-lookup decoding (the n-gram-only baseline)."""
from __future__ import annotations

from collections import Counter, defaultdict


class NGramTable:
    """Counts of n-grams by first token; topk(token, k) = the k most frequent n-grams starting with token
    (ties: the one seen first, as Counter.most_common keeps insertion order)."""

    def __init__(self, n: int = 4):
        self.n = n
        self.table: dict[int, Counter] = defaultdict(Counter)

    def update(self, gram) -> None:
        gram = tuple(int(t) for t in gram)
        assert len(gram) == self.n
        self.table[gram[0]][gram[1:]] += 1

    def preload(self, tokens) -> None:
        for i in range(len(tokens) - self.n + 1):
            self.update(tokens[i:i + self.n])

    def topk(self, token: int, k: int) -> list[tuple]:
        c = self.table.get(int(token))
        if not c or k <= 0:
            return []
        return [(int(token),) + cont for cont, _ in c.most_common(k)]


class SuffixIndex:
    """Prompt lookup: for m = max_m..1, the most recent earlier occurrence of the last m tokens and the
    tokens that followed it."""

    def __init__(self, max_m: int = 3):
        self.max_m = max_m
        self.last: list[dict] = [dict() for _ in range(max_m + 1)]
        self.seq: list[int] = []

    def extend(self, tokens) -> None:
        for t in tokens:
            j = len(self.seq)  # the new token's index: every gram ending at j-1 is followed by it
            for m in range(1, self.max_m + 1):
                if j - m >= 0:
                    self.last[m][tuple(self.seq[j - m:j])] = j
            self.seq.append(int(t))

    def propose(self, n_pred: int) -> list[int]:
        s = self.seq
        for m in range(min(self.max_m, len(s)), 0, -1):
            j = self.last[m].get(tuple(s[-m:]))
            if j is not None:
                return s[j:j + n_pred]
        return []
