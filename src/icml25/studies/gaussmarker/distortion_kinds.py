"""The distortion kinds and their config check: torch-free, so validating a config (every stage does)
stays light."""
from __future__ import annotations

from icml25.core.errors import UserError

KINDS = ("clean", "rotate", "crop_resize", "jpeg", "blur", "noise", "brightness", "median", "resize",
         "random_crop", "random_drop", "salt_pepper")


def check(distortions: dict) -> None:
    if not distortions:
        raise UserError("gaussmarker: `distortions` must name at least one distortion (e.g. clean)")
    need = {"rotate": "degrees", "crop_resize": "ratio", "jpeg": "quality", "blur": "radius", "median": "k",
            "noise": "std", "brightness": "factor", "resize": "ratio", "random_crop": "ratio",
            "random_drop": "ratio", "salt_pepper": "p"}
    for name, spec in distortions.items():
        kind = (spec or {}).get("kind")
        if kind not in KINDS:
            raise UserError(f"gaussmarker: distortion '{name}' has unknown kind {kind!r}; known: {', '.join(KINDS)}")
        if kind in need and need[kind] not in spec:
            raise UserError(f"gaussmarker: distortion '{name}' ({kind}) needs '{need[kind]}'")
