"""The study contract and the registry.

A study is the package `icml25.studies.<name>` whose `study` module defines `STUDY`, a `Study`.
The shared machinery only calls the hooks below; a study never knows about Snakemake or MLflow.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from . import evidence
from .errors import UserError

FLOOR = evidence.FLOOR
VERDICTS = ("holds", "fails", "inconclusive", FLOOR, "n.a.")


@dataclass(frozen=True)
class Paper:
    title: str
    authors: str
    arxiv: str
    code: str
    venue: str = "ICML 2025"


@dataclass(frozen=True)
class Method:
    name: str
    label: str
    is_paper_method: bool = False
    description: str = ""


@dataclass
class ClaimResult:
    """A claim's verdict and the numbers behind it (see icml25.core.evidence).

    `margin` is signed, in the claim's own units (`unit`), > 0 when the claim holds, e.g. "SAND minus
    random-k accuracy on the worst dataset". `interval` is a paired 95% interval of the margin over the
    `n_seeds` seeds it rests on. Build one with `ClaimResult.of(...)`, which computes the verdict; a
    verdict given by hand must agree with its margin and interval.
    """

    verdict: str  # holds | fails | inconclusive | n.a. (floor) | n.a.
    ours: str  # the numbers behind the verdict, in words
    margin: Optional[float] = None
    unit: str = ""
    interval: Optional[tuple[float, float]] = None
    n_seeds: Optional[int] = None

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")
        if self.margin is not None:
            self.margin = float(self.margin)
        if self.interval is not None:
            self.interval = (float(self.interval[0]), float(self.interval[1]))
        evidence.check_consistent(self.verdict, self.margin, self.interval)

    @classmethod
    def of(cls, ours: str, margin: Optional[float] = None, unit: str = "", per_seed=None,
           n_seeds: Optional[int] = None) -> "ClaimResult":
        """The verdict computed from the evidence. `per_seed`: the margin of each seed (paired over the
        seeds the compared cells share); the margin is then their mean and the interval their t interval.
        Without `per_seed` (a claim over one pooled number) the verdict is the margin's sign."""
        interval = None
        if per_seed is not None:
            xs = [float(x) for x in (per_seed.values() if isinstance(per_seed, dict) else per_seed)]
            if not xs:
                raise KeyError("no seed shared by the compared cells")
            margin = sum(xs) / len(xs)
            interval = evidence.t_interval(xs)
            n_seeds = len(xs)
        return cls(evidence.verdict_for(margin, interval), ours, margin, unit, interval, n_seeds)


@dataclass(frozen=True)
class Claim:
    """A qualitative claim of the paper, checked in code over the aggregated results.

    `check(agg, cfg)` gets the aggregated frame (method, setting, metric, mean, std, n, values, seeds) and
    the effective config; it returns a ClaimResult with the numbers. It must return n.a. (not fail)
    when the rows it needs are absent, e.g. a method disabled in config.
    """

    id: str
    text: str
    paper: str  # the paper's figure, e.g. "Madelon .732 vs .642 (Table 2)"
    check: Callable[[Any, dict], ClaimResult]
    # False only where no scalar margin makes sense (e.g. a claim about a shape); the contract suite
    # requires a margin of every other claim that is not n.a.
    scalar: bool = True


@dataclass(frozen=True)
class Study:
    name: str
    paper: Paper
    methods: dict[str, Method]
    # metric name -> (description, "higher"|"lower"|"") ; evaluate/train rows must use these names
    metrics: dict[str, tuple[str, str]]
    download: Callable[[dict, Path], None]
    preprocess: Callable[[dict, Path, Path], None]
    train: Callable[[dict, str, int, Path, Optional[Path], Path], dict]
    evaluate: Callable[[dict, str, int, Path, Optional[Path], Path], list]
    make_table: Callable[[Any, dict], Any]
    claims: list[Claim]
    stand_ins: dict[str, str] = field(default_factory=dict)  # scale -> what stands in for the paper's setup
    fit_base: Optional[Callable[[dict, Path, Path], None]] = None
    validate: Optional[Callable[[dict], None]] = None  # raise UserError on values the schema cannot express
    # figures(agg, cfg, out_dir[, ctx]) -> [Figure | (name, Figure) | path]: optional; run by the
    # `figures` stage into results/<scale>/figures/<study>/. See icml25.core.figures (the shared helper)
    # for the contract, the style and what `ctx` (per-run files, curves, claims) offers.
    figures: Optional[Callable[..., list]] = None

    @property
    def paper_method(self) -> str:
        """The (first) method of the paper; a paper may propose several (e.g. Marg-IW and Marg-Var)."""
        return next(m.name for m in self.methods.values() if m.is_paper_method)

    def check_method(self, method: str) -> Method:
        if method not in self.methods:
            raise UserError(
                f"unknown method '{method}' for study '{self.name}'; known: {', '.join(self.methods)}"
            )
        return self.methods[method]


def lazy_hook(module: str, attr: str) -> Callable[..., Any]:
    """A hook that imports `module` only when called, so heavy imports (matplotlib, torch) stay out of
    `icml25 table`. It forwards the optional `ctx` only to hooks that take one (as the figures stage
    decides for any hook)."""
    import inspect

    def hook(*args):
        fn = getattr(importlib.import_module(module), attr)
        params = inspect.signature(fn).parameters
        takes_all = len(params) >= len(args) or any(p.kind == p.VAR_POSITIONAL for p in params.values())
        return fn(*args) if takes_all else fn(*args[: len(params)])

    hook.__name__ = f"lazy:{module}.{attr}"
    return hook


def available() -> list[str]:
    import icml25.studies as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if m.ispkg)


def get_study(name: str) -> Study:
    known = available()
    if name not in known:
        raise UserError(f"unknown study '{name}'; known studies: {', '.join(known)}")
    module = importlib.import_module(f"icml25.studies.{name}.study")
    study = getattr(module, "STUDY", None)
    if not isinstance(study, Study) or study.name != name:
        raise RuntimeError(f"icml25.studies.{name}.study must define STUDY = Study(name='{name}', ...)")
    return study


def study_dir(name: str) -> Path:
    return Path(__file__).resolve().parent.parent / "studies" / name
