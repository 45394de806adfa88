"""TOFU-lite: a procedural stand-in for TOFU (fictitious authors, 10 attributes each), and the TOFU loader.

Every QA item is a dict:
    question, para_question, answer (whitespace-separated words), fact_flags (one 0/1 per answer word:
    1 on the fact-carrying words, the exact importance annotation ImpT uses), critical (the fact words as
    one string, the format of the official TOFU annotation files), perturbed (3 wrong answers), author, attr.

Splits (author-disjoint): forget10 (and its first half forget05), val_forget (the validation author split
the learning rate is chosen on), retain_train (the GD retain stream), retain_val (retain calibration during
lr selection), retain_eval (held out from every unlearning stream: the retain ES), world (world facts).
The base model is fitted on every author's QAs plus the world facts (`base_train`).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SYLLABLES = ["ka", "lo", "ren", "vi", "sta", "mor", "qu", "el", "dra", "zan", "tho", "bri", "ul", "ne", "fa",
             "gor", "shi", "ya", "pel", "tu", "vos", "ir", "ma", "xen", "od", "ha", "lin", "cor", "besh", "um"]

CITIES = ["lisbon", "kyoto", "nairobi", "oslo", "lima", "cairo", "hanoi", "quito", "dublin", "perth", "tunis",
          "riga", "havana", "seoul", "manila", "bogota", "accra", "tbilisi", "baku", "minsk"]
GENRES = [("science", "fiction"), ("historical", "fiction"), ("poetry",), ("crime",), ("fantasy",), ("horror",),
          ("romance",), ("satire",), ("memoir",), ("thriller",)]
JOBS = ["baker", "surgeon", "pilot", "teacher", "farmer", "lawyer", "tailor", "chemist", "sailor", "carpenter",
        "nurse", "painter", "librarian", "mechanic", "journalist"]
AWARD_ADJ = ["golden", "silver", "crimson", "azure", "emerald"]
AWARD_NOUN = ["quill", "lantern", "compass", "anchor", "feather"]
BOOK_ADJ = ["silent", "hidden", "broken", "last", "frozen", "burning", "forgotten", "endless"]
BOOK_NOUN = ["river", "garden", "mirror", "harbor", "orchard", "tower", "letter", "voyage"]
PUB_NAME = ["meridian", "northwind", "bluestone", "ironwood", "cedar", "sparrow", "saltmarsh", "greyfield"]
PUB_KIND = ["press", "books", "house"]
NATIONALITIES = ["portuguese", "japanese", "kenyan", "norwegian", "peruvian", "egyptian", "vietnamese",
                 "ecuadorian", "irish", "australian"]
LANGUAGES = ["english", "french", "spanish", "arabic", "swahili", "japanese", "portuguese", "russian", "hindi",
             "german"]

# attribute -> (question, paraphrased question, answer template); {n} the author, {v} the value
TEMPLATES = {
    "birth_city": ("where was {n} born ?", "in which city was {n} born ?", "{n} was born in {v} ."),
    "birth_year": ("in what year was {n} born ?", "what is the birth year of {n} ?", "{n} was born in the year {v} ."),
    "genre": ("what genre does {n} write ?", "which genre is {n} known for ?", "{n} is known for writing {v} ."),
    "father_job": ("what did the father of {n} do for a living ?", "what was the job of the father of {n} ?",
                   "the father of {n} worked as a {v} ."),
    "mother_job": ("what did the mother of {n} do for a living ?", "what was the job of the mother of {n} ?",
                   "the mother of {n} worked as a {v} ."),
    "award": ("which award did {n} win ?", "what prize was given to {n} ?", "{n} won the {v} prize ."),
    "debut_book": ("what was the first book of {n} ?", "which book did {n} publish first ?",
                   "the debut novel of {n} was the {v} ."),
    "publisher": ("who publishes the books of {n} ?", "which publisher works with {n} ?",
                  "the books of {n} are published by {v} ."),
    "nationality": ("what is the nationality of {n} ?", "which country is {n} a citizen of ?", "{n} is {v} by birth ."),
    "language": ("in which language does {n} write ?", "what language are the books of {n} written in ?",
                 "{n} writes in {v} ."),
}
ATTRIBUTES = list(TEMPLATES)

CAPITALS = [("france", "paris"), ("japan", "tokyo"), ("italy", "rome"), ("spain", "madrid"), ("egypt", "cairo"),
            ("kenya", "nairobi"), ("peru", "lima"), ("norway", "oslo"), ("ireland", "dublin"), ("cuba", "havana"),
            ("germany", "berlin"), ("russia", "moscow"), ("china", "beijing"), ("india", "delhi"),
            ("greece", "athens"), ("poland", "warsaw"), ("austria", "vienna"), ("sweden", "stockholm"),
            ("chile", "santiago"), ("ghana", "accra")]
NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen"]


def _names(rng: np.random.Generator, n: int) -> list[str]:
    out, seen = [], set()
    while len(out) < n:
        first = "".join(rng.choice(SYLLABLES, size=int(rng.integers(2, 4))))
        last = "".join(rng.choice(SYLLABLES, size=int(rng.integers(2, 4))))
        name = f"{first} {last}"
        if first != last and name not in seen and first not in seen and last not in seen:
            seen.update((name, first, last))
            out.append(name)
    return out


def _value(rng: np.random.Generator, attr: str) -> tuple[str, ...]:
    c = lambda xs: xs[int(rng.integers(len(xs)))]  # noqa: E731
    if attr == "birth_city":
        return (c(CITIES),)
    if attr == "birth_year":
        return (str(int(rng.integers(1930, 2000))),)
    if attr == "genre":
        return c(GENRES)
    if attr in ("father_job", "mother_job"):
        return (c(JOBS),)
    if attr == "award":
        return (c(AWARD_ADJ), c(AWARD_NOUN))
    if attr == "debut_book":
        return (c(BOOK_ADJ), c(BOOK_NOUN))
    if attr == "publisher":
        return (c(PUB_NAME), c(PUB_KIND))
    if attr == "nationality":
        return (c(NATIONALITIES),)
    if attr == "language":
        return (c(LANGUAGES),)
    raise KeyError(attr)


def _answer(attr: str, name: str, value: tuple[str, ...]) -> tuple[str, list[int]]:
    """The answer sentence and its fact flags: 1 exactly on the words of the attribute's value."""
    words, flags = [], []
    for part in TEMPLATES[attr][2].split():
        if part == "{n}":
            words += name.split()
            flags += [0] * len(name.split())
        elif part == "{v}":
            words += list(value)
            flags += [1] * len(value)
        else:
            words.append(part)
            flags.append(0)
    return " ".join(words), flags


def author_items(rng: np.random.Generator, name: str, idx: int) -> list[dict]:
    items = []
    for attr in ATTRIBUTES:
        value = _value(rng, attr)
        answer, flags = _answer(attr, name, value)
        perturbed = []
        while len(perturbed) < 3:
            other = _value(rng, attr)
            if other != value and _answer(attr, name, other)[0] not in perturbed:
                perturbed.append(_answer(attr, name, other)[0])
        q, pq, _ = TEMPLATES[attr]
        items.append({"question": q.format(n=name), "para_question": pq.format(n=name), "answer": answer,
                      "fact_flags": flags, "critical": " ".join(value), "perturbed": perturbed,
                      "author": idx, "attr": attr})
    return items


def world_items(n: int) -> list[dict]:
    """Deterministic world facts: capitals, then small sums (x plus y), up to n items."""
    items = []
    for country, city in CAPITALS:
        ans = f"the capital of {country} is {city} ."
        wrong = [f"the capital of {country} is {c} ." for _, c in CAPITALS if c != city][:3]
        items.append({"question": f"what is the capital of {country} ?",
                      "para_question": f"which city is the capital of {country} ?",
                      "answer": ans, "fact_flags": [0, 0, 0, 0, 0, 1, 0], "critical": city, "perturbed": wrong,
                      "author": -1, "attr": "capital"})
    for a in range(1, 10):
        for b in range(1, 10):
            s = NUMBER_WORDS[a + b]
            ans = f"{NUMBER_WORDS[a]} plus {NUMBER_WORDS[b]} is {s} ."
            wrong = [f"{NUMBER_WORDS[a]} plus {NUMBER_WORDS[b]} is {NUMBER_WORDS[(a + b + k) % 19]} ." for k in (1, 2, 3)]
            items.append({"question": f"what is {NUMBER_WORDS[a]} plus {NUMBER_WORDS[b]} ?",
                          "para_question": f"how much is {NUMBER_WORDS[a]} plus {NUMBER_WORDS[b]} ?",
                          "answer": ans, "fact_flags": [0, 0, 0, 0, 1, 0], "critical": s, "perturbed": wrong,
                          "author": -1, "attr": "sum"})
    return items[:n]


def generate(data_cfg: dict) -> dict:
    """The whole TOFU-lite data set from its seed: authors, splits and world facts."""
    rng = np.random.default_rng(int(data_cfg.get("data_seed", 0)))
    n_authors = int(data_cfg["n_authors"])
    names = _names(rng, n_authors)
    authors = [author_items(rng, name, i) for i, name in enumerate(names)]
    order = rng.permutation(n_authors).tolist()
    sizes = data_cfg["split_authors"]  # forget, val_forget, retain_val, retain_eval; the rest: retain_train
    f, v, rv, re_ = (int(sizes[k]) for k in ("forget", "val_forget", "retain_val", "retain_eval"))
    if f + v + rv + re_ >= n_authors:
        raise ValueError(f"split_authors {sizes} leave no retain_train authors out of {n_authors}")
    ids = {"forget10": order[:f], "val_forget": order[f:f + v], "retain_val": order[f + v:f + v + rv],
           "retain_eval": order[f + v + rv:f + v + rv + re_], "retain_train": order[f + v + rv + re_:]}
    ids["forget05"] = ids["forget10"][: max(1, f // 2)]
    splits = {k: [it for a in sorted(v_) for it in authors[a]] for k, v_ in ids.items()}
    splits["world"] = world_items(int(data_cfg["n_world"]))
    splits["base_train"] = [it for a in authors for it in a] + splits["world"]
    return {"names": names, "author_splits": ids, "splits": splits}


# ---- TOFU (full scale) ---------------------------------------------------------------------------------

TOFU_BASE = "https://huggingface.co/datasets/locuslab/TOFU/resolve/main"
SATIMP_BASE = "https://raw.githubusercontent.com/tmlr-group/SatImp/51314c05abe393801fb8134b78ef402b0c95e4e2/data"
# The official important-token annotations of SatImp.
IMPORTANCE_SHA256 = {  # read from the official repository at commit 51314c0
    "forget01": "5fc91df36003d8d670bf3f66000ebc694e8e55474c9e4770e55537cb5a7227fd",
    "forget05": "db778018a617140f070063d0a4baff7c56df7be7cc535e74b2ad976c74931113",
    "forget10": "2e751bc17071c136b272bcaaa5515037e9e4f62deb21142e34d035b665e5bd13",
}


def tofu_files(forget_splits: list[str]) -> dict[str, str]:
    """TOFU files the full scale needs: name -> URL (the Hub's JSON-lines files; no published checksums, so
    the data manifest records their sha256) and SatImp's official importance annotations."""
    names = ["full.json", "world_facts_perturbed.json"] + [f"{s}_perturbed.json" for s in forget_splits]
    files = {n: f"{TOFU_BASE}/{n}" for n in names}
    files.update({f"importance_{s}.pth": f"{SATIMP_BASE}/importance_{s}.pth" for s in forget_splits})
    return files


def _read_records(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8").strip()
    if text.startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]  # JSON lines, as the Hub files


def _tofu_item(rec: dict, author: int, critical: str | None = None) -> dict:
    return {"question": rec["question"], "para_question": rec.get("paraphrased_question", rec["question"]),
            "answer": rec["answer"], "fact_flags": None, "critical": critical,
            "perturbed": list(rec.get("perturbed_answer", []))[:3], "author": author, "attr": "tofu"}


def load_importance(path: Path) -> list[str]:
    """The official annotation file: {index: critical words as one string} (a torch pickle)."""
    import torch

    obj = torch.load(path, weights_only=False)
    return [obj[k] for k in sorted(obj)] if isinstance(obj, dict) else list(obj)


def tofu_splits(raw_dir: Path, forget_splits: list[str], data_cfg: dict) -> dict:
    """TOFU in the internal format (20 QAs per author, the nested forget sets are the last authors of
    `full`). Retain = `full` minus the largest forget set, in file order: retain_eval = its first
    `n_retain_eval` QAs (SatImp's eval split), retain_val = the next `n_retain_val`, val_forget = its last
    `val_authors` authors (the lr-selection split), retain_train = the rest."""
    full = _read_records(raw_dir / "full.json")
    per = int(data_cfg.get("qas_per_author", 20))
    out = {}
    n_max = 0
    for split in forget_splits:
        recs = _read_records(raw_dir / f"{split}_perturbed.json")
        imp_file = raw_dir / f"importance_{split}.pth"
        critical = load_importance(imp_file) if imp_file.exists() else [None] * len(recs)
        if len(critical) != len(recs):
            raise ValueError(f"{imp_file.name} has {len(critical)} annotations for {len(recs)} forget QAs")
        first = len(full) - len(recs)
        out[split] = [_tofu_item(r, (first + i) // per, c) for i, (r, c) in enumerate(zip(recs, critical))]
        n_max = max(n_max, len(recs))
    retain = [_tofu_item(r, i // per) for i, r in enumerate(full[: len(full) - n_max])]
    n_eval, n_val = int(data_cfg.get("n_retain_eval", 400)), int(data_cfg.get("n_retain_val", 400))
    n_vf = int(data_cfg.get("val_authors", 20)) * per
    if n_eval + n_val + n_vf >= len(retain):
        raise ValueError(f"TOFU retain set of {len(retain)} QAs is too small for the eval/val splits")
    out.update(val_forget=retain[len(retain) - n_vf:], retain_eval=retain[:n_eval],
               retain_val=retain[n_eval:n_eval + n_val], retain_train=retain[n_eval + n_val:len(retain) - n_vf],
               world=[_tofu_item(r, -1) for r in _read_records(raw_dir / "world_facts_perturbed.json")],
               base_train=[_tofu_item(r, i // per) for i, r in enumerate(full)])
    return out
