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
from pathlib import Path
from typing import Any

from .errors import UserError

SCALES = ("smoke", "mini", "full")


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
    """The config one (study, scale) runs with: common settings overridden by the scale's."""
    if scale not in SCALES:
        raise UserError(f"unknown scale '{scale}': choose one of {', '.join(SCALES)}")
    if scale not in raw["scales"]:
        raise UserError(f"study '{raw['study']}' has no '{scale}' scale in config/studies/{raw['study']}.yaml")
    cfg = deep_merge(raw.get("common", {}), raw["scales"][scale])
    cfg["study"] = raw["study"]
    cfg["scale"] = scale
    # a scale may run its own method list (e.g. an analysis of a dataset that only the full scale has)
    cfg["methods"] = list(raw["scales"][scale].get("methods") or raw["methods"])
    cfg.setdefault("seeds", [0])
    return cfg


def result_config(cfg: dict) -> dict:
    """The part of a study's effective config that decides its numbers: resources (memory, runtime,
    cores, GPUs) say where a job runs, not what it computes, so changing them reruns nothing."""
    return {k: v for k, v in cfg.items() if k != "resources"}


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
