"""Hand-made run files for table and claim tests: one metrics.json per (method, seed), as the evaluate stage writes."""
from __future__ import annotations

from icml25.core.io import write_json


def metric_files(root, values: dict, scale: str = "smoke", setting: str = "d1", metric: str = "acc") -> list:
    """{(method, seed): value} -> the paths of `<root>/<method>/seed<seed>/metrics.json`, one metric each."""
    files = []
    for (method, seed), v in values.items():
        f = root / method / f"seed{seed}" / "metrics.json"
        write_json(f, {"study": "toy", "scale": scale, "method": method, "seed": seed,
                       "metrics": [{"setting": setting, "metric": metric, "value": v}]})
        files.append(f)
    return files
