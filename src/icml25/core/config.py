"""Config loading and validation.

`config/config.yaml` is the pipeline config (scale, studies, tracking); `config/studies/<study>.yaml`
holds a study's methods, seeds and per-scale sizes. Both are validated against JSON schemas in
`config/` (the same files the Snakefile hands to `snakemake.utils.validate`).

A study's effective config at a scale is `common` deep-merged with `scales[<scale>]`.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from .errors import UserError

SCALES = ("smoke", "mini", "full")
# a budget sweep's derived scale: `<scale>-x<factor>`, e.g. mini-x3 (the scale's budget knobs times 3)
DERIVED = re.compile(r"^(smoke|mini|full)-x([1-9][0-9]*)$")
# a declared variant of a scale: `<scale>-<name>` (scales.<scale>.variants.<name>, merged over the scale),
# e.g. full-qwen2_5_7b: the same study at full scale with another model or dataset
# (x<digits> names are the sweep's, never a variant's)
VARIANT = re.compile(r"^(smoke|mini|full)-(?!x[0-9])([a-z][a-z0-9_]*)$")


def parse_scale(scale: str) -> tuple[str, int]:
    """('mini', 1) for 'mini' and for a variant 'full-<name>', ('mini', 3) for 'mini-x3'; UserError for
    anything else (whether the variant is declared is checked per study, in `effective`)."""
    if scale in SCALES:
        return scale, 1
    m = DERIVED.match(str(scale))
    if m:
        return m.group(1), int(m.group(2))
    m = VARIANT.match(str(scale))
    if m:
        return m.group(1), 1
    raise UserError(f"unknown scale '{scale}': choose one of {', '.join(SCALES)} "
                    "(or <scale>-x<factor> for a budget sweep, e.g. mini-x3, or <scale>-<variant> for a "
                    "variant a study declares, e.g. full-qwen2_5_7b)")


def variant_of(scale: str) -> str | None:
    """The variant name of `<scale>-<name>`, None for a plain or sweep scale."""
    m = VARIANT.match(str(scale))
    return m.group(2) if m else None


def _load_yaml(path: Path) -> Any:
    import yaml

    if not path.exists():
        raise UserError(f"config file {path} not found")
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{path}: malformed YAML{where}: {problem}; fix the file's syntax") from None


def validate(obj: Any, schema_path: Path, what: str) -> None:
    """Validate `obj` against a JSON schema file; raise one clear line naming the bad value."""
    import jsonschema

    schema = _load_yaml(schema_path)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        loc = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        raise UserError(f"{what}: invalid value at '{loc}': {err.message}")


def root_paths(root: Path) -> dict[str, Path]:
    return {
        "config": root / "config" / "config.yaml",
        "schema": root / "config" / "config.schema.yaml",
        "study_schema": root / "config" / "study.schema.yaml",
        "studies": root / "config" / "studies",
    }


def load_main(root: Path, path: Path | None = None) -> dict:
    paths = root_paths(root)
    path = path or paths["config"]
    cfg = _load_yaml(path)
    if not isinstance(cfg, dict):
        raise UserError(f"{path}: expected a mapping at top level")
    validate(cfg, paths["schema"], str(path.relative_to(root) if path.is_relative_to(root) else path))
    return cfg


def study_file(root: Path, study: str) -> Path:
    return root_paths(root)["studies"] / f"{study}.yaml"


def load_study(root: Path, study: str) -> dict:
    path = study_file(root, study)
    if not path.exists():
        known = sorted(p.stem for p in root_paths(root)["studies"].glob("*.yaml"))
        raise UserError(f"unknown study '{study}': no {path.relative_to(root)}; known studies: {', '.join(known)}")
    raw = _load_yaml(path)
    validate(raw, root_paths(root)["study_schema"], str(path.relative_to(root)))
    if raw["study"] != study:
        raise UserError(f"{path.relative_to(root)}: 'study: {raw['study']}' does not match the file name '{study}'")
    return raw


def deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, val in (over or {}).items():
        if isinstance(val, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], val)
        else:
            out[key] = copy.deepcopy(val)
    return out


def effective(raw: dict, scale: str) -> dict:
    """The config one (study, scale) runs with: common settings overridden by the scale's. A derived
    scale `<scale>-x<f>` is the scale with each of its sweep knobs multiplied by f (and the sweep's seeds);
    a variant `<scale>-<name>` is the scale with `scales.<scale>.variants.<name>` merged over it (the
    variants block never enters a scale's own config, so declaring one changes no result hash)."""
    base, factor = parse_scale(scale)
    if base not in raw["scales"]:
        raise UserError(f"study '{raw['study']}' has no '{base}' scale in config/studies/{raw['study']}.yaml")
    scale_cfg = dict(raw["scales"][base] or {})
    variants = scale_cfg.pop("variants", None) or {}
    variant = variant_of(scale)
    if variant is not None:
        if variant not in variants:
            raise UserError(f"study '{raw['study']}' declares no variant '{variant}' of scale '{base}' "
                            f"(known: {', '.join(sorted(variants)) or 'none'}); add scales.{base}.variants."
                            f"{variant} to config/studies/{raw['study']}.yaml")
        scale_cfg = deep_merge(scale_cfg, variants[variant])
    cfg = deep_merge(raw.get("common", {}), scale_cfg)
    cfg["study"] = raw["study"]
    cfg["scale"] = base  # studies branch on the scale (e.g. full-scale loaders); the factor is separate
    # a scale may run its own method list (e.g. an analysis of a dataset that only the full scale has)
    cfg["methods"] = list(scale_cfg.get("methods") or raw["methods"])
    cfg.setdefault("seeds", [0])
    if variant is not None:
        cfg["variant"] = variant
    if DERIVED.match(str(scale)):
        sweep = sweep_spec(raw, base)
        for knob in sweep["knobs"]:
            _scale_knob(cfg, knob, factor, raw["study"])
        cfg["seeds"] = list(sweep.get("seeds") or cfg["seeds"])
        cfg["budget_factor"] = factor
        if sweep.get("seeds"):  # a sweep that names its seeds runs every method on them
            cfg.pop("method_seeds", None)
    unknown = sorted(set(cfg.get("method_seeds") or {}) - set(cfg["methods"]))
    if unknown:
        raise UserError(f"config/studies/{raw['study']}.yaml: scales.{base}.method_seeds names "
                        f"{', '.join(unknown)}, not a method of this scale ({', '.join(cfg['methods'])})")
    return cfg


def seeds_of(cfg: dict, method: str) -> list[int]:
    """The seeds `method` runs at this scale: its `method_seeds` entry where the scale has one (e.g. more
    seeds for the cheap baselines than for an expensive method), else the scale's `seeds`."""
    return list((cfg.get("method_seeds") or {}).get(method) or cfg["seeds"])


def all_seeds(cfg: dict) -> list[int]:
    """Every seed some method runs at this scale, sorted (what the data stages must prepare)."""
    return sorted({int(s) for m in cfg["methods"] for s in seeds_of(cfg, m)})


def runs(cfg: dict) -> list[tuple[str, int]]:
    """The (method, seed) runs of a scale, method by method: `seeds_of` each method."""
    return [(m, s) for m in cfg["methods"] for s in seeds_of(cfg, m)]


def sweep_spec(raw: dict, scale: str) -> dict:
    """A study's budget sweep at a scale: {knobs: [dotted config paths], factors: [1, 3, 10], seeds}."""
    spec = dict((raw["scales"].get(scale) or {}).get("sweep") or {})
    if not spec.get("knobs"):
        raise UserError(f"study '{raw['study']}' declares no budget knob at scale '{scale}': add "
                        f"scales.{scale}.sweep.knobs (e.g. [train.epochs]) to config/studies/{raw['study']}.yaml")
    spec.setdefault("factors", [1, 3, 10])
    return spec


def _scale_knob(cfg: dict, knob: str, factor: int, study: str) -> None:
    """Multiply the setting at a dotted path (a `*` segment: every key at that level) by factor."""
    def times(v):
        if isinstance(v, bool) or not isinstance(v, (int, float, dict, list)):
            raise UserError(f"config/studies/{study}.yaml: sweep knob '{knob}' holds {v!r}, not a number")
        if isinstance(v, dict):
            return {k: times(x) for k, x in v.items()}
        if isinstance(v, list):
            return [times(x) for x in v]
        return int(round(v * factor)) if isinstance(v, int) else v * factor

    def walk(node, keys):
        head, rest = keys[0], keys[1:]
        names = list(node) if head == "*" and isinstance(node, dict) else [head]
        if not isinstance(node, dict) or any(k not in node for k in names) or not names:
            raise UserError(f"config/studies/{study}.yaml: sweep knob '{knob}' is not a setting of the scale")
        for k in names:
            if rest:
                walk(node[k], rest)
            else:
                node[k] = times(node[k])

    walk(cfg, knob.split("."))


def result_config(cfg: dict) -> dict:
    """The part of a study's effective config that decides its numbers: resources (memory, runtime,
    cores, GPUs) say where a job runs, not what it computes, so changing them reruns nothing; nor does
    declaring a budget sweep (it only defines the derived scales)."""
    return {k: v for k, v in cfg.items() if k not in ("resources", "sweep")}


def config_hash(cfg: dict) -> str:
    blob = json.dumps(cfg, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def flatten(cfg: dict, prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists are kept as JSON text (MLflow params are strings)."""
    out: dict[str, Any] = {}
    for key, val in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(val, dict):
            out.update(flatten(val, name + "."))
        elif isinstance(val, (list, tuple)):
            out[name] = json.dumps(val)
        else:
            out[name] = val
    return out
