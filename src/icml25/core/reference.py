"""Reference results: the mini tables the docs quote, committed under `reference/<scale>/` and stamped
with the hashes that decide them (showyourwork's idea, with our provenance hashes).

    reference/<scale>/<study>.md|csv|claims.json   copies of results/<scale>/tables/<study>.*
    reference/<scale>/<study>.stamp.json            config hash, code hash, git commit, machine
    reference/<scale>/summary.md                    the claims of every referenced study

The stamp's hashes are the ones the train/evaluate rules use as rerun triggers (the study's effective
config without `resources`, and its sources without figures*.py): a study whose code or config changed
has a stale reference, which tests/test_reference.py reports with the command that refreshes it.
`verify` compares a fresh run with the reference: identical numbers where the study is deterministic,
otherwise within the per-metric tolerance its config states (`verify.tolerance`), and the same verdicts.
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
from importlib import metadata
from pathlib import Path

from . import config as icfg
from . import numeric_pin, provenance
from .errors import UserError

SUFFIXES = (".md", ".csv", ".claims.json")


def ref_dir(root: Path, scale: str) -> Path:
    return Path(root) / "reference" / scale


def hashes(root: Path, study: str, scale: str) -> dict:
    root = Path(root)
    cfg = icfg.result_config(icfg.effective(icfg.load_study(root, study), scale))
    return {"config_hash": icfg.config_hash(cfg),
            "code_hash": provenance.code_hash(study, root=root, exclude="figures*.py")}


def machine() -> dict:
    """What the numbers were computed on (without importing torch or numpy)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    def version(pkg):
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return "absent"

    blas = "unknown"
    try:
        from threadpoolctl import threadpool_info

        import numpy  # noqa: F401  (threadpoolctl only sees loaded BLAS libraries)

        libs = [f"{i.get('internal_api')} {i.get('version')}" for i in threadpool_info() if i.get("user_api") == "blas"]
        blas = ", ".join(libs) or blas
    except ImportError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": version("torch"), "numpy": version("numpy"), "blas": blas, "cpu_isa": cpu_isa(),
            "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY", "unset"),
            "numeric_pin": numeric_pin.settings(), "cpu_vendor": numeric_pin.cpu_vendor(),
            "mkl_cnr": numeric_pin.expected_mkl_cnr()}


def mkl_text(m: dict) -> str:
    """'MKL capped at AVX2, CNR branch AUTO (MKL_CBWR=AVX2)' for a machine record (older records: the variable)."""
    pin = m.get("numeric_pin", {})
    return (f"MKL capped at {pin.get('MKL_ENABLE_INSTRUCTIONS', 'unset')}, CNR branch "
            f"{m.get('mkl_cnr', '?')} (MKL_CBWR={pin.get('MKL_CBWR', 'unset')})")


def cpu_isa() -> str:
    """The widest x86 vector extension the CPU reports (avx512 / avx2 / older), from /proc/cpuinfo: torch's
    kernels, and so the numbers, differ between AVX-512 and AVX2 unless ATEN_CPU_CAPABILITY pins them."""
    try:
        flags = next((ln.split(":", 1)[1].split() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                      if ln.startswith("flags")), [])
    except OSError:
        return "unknown"
    return "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else ("unknown" if not flags else "older")


def write(root: Path, study: str, scale: str = "mini") -> Path:
    """Copy a finished run's table and claims into reference/<scale>/ and stamp them."""
    root = Path(root)
    src = root / "results" / scale / "tables"
    missing = [src / f"{study}{s}" for s in SUFFIXES if not (src / f"{study}{s}").exists()]
    if missing:
        raise UserError(f"no {missing[0]}: run `snakemake {missing[0].relative_to(root)} --config scale={scale}` first")
    stamp = {"study": study, "scale": scale, **hashes(root, study, scale),
             "git_commit": provenance.git_commit(root), "machine": machine()}
    out = ref_dir(root, scale)
    out.mkdir(parents=True, exist_ok=True)
    for s in (".csv", ".claims.json"):
        shutil.copyfile(src / f"{study}{s}", out / f"{study}{s}")
    m = stamp["machine"]
    header = (f"> Reference results ({scale}) of `{study}`: config hash {stamp['config_hash']}, code hash "
              f"{stamp['code_hash']}, commit {stamp['git_commit']}; machine: {m['cpu']}, {m['cores']} cores, "
              f"torch {m['torch']}, numpy {m['numpy']}, BLAS {m['blas']}, CPU {m['cpu_isa']} with torch kernels "
              f"{m['aten_cpu_capability']}, {mkl_text(m)}, oneDNN ISA "
              f"{m['numeric_pin']['ONEDNN_MAX_CPU_ISA']}, OpenBLAS core {m['numeric_pin']['OPENBLAS_CORETYPE']}. "
              f"Refresh: `make reference STUDY={study}`.\n\n")
    (out / f"{study}.md").write_text(header + (src / f"{study}.md").read_text())
    (out / f"{study}.stamp.json").write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n")
    write_summary(root, scale)
    base, factor = icfg.parse_scale(scale)
    if factor > 1 and (ref_dir(root, base) / "summary.md").exists():
        write_summary(root, base)  # its "verdict at <scale>" column reads this reference
    return out


def derived_scales(root: Path, scale: str) -> list[str]:
    """The budget-sweep scales `<scale>-x<f>` with references beside reference/<scale>/, by factor."""
    found = []
    for d in (Path(root) / "reference").glob(f"{scale}-x*"):
        try:
            base, factor = icfg.parse_scale(d.name)
        except UserError:
            continue
        if base == scale and factor > 1 and any(d.glob("*.claims.json")):
            found.append((factor, d.name))
    return [name for _, name in sorted(found)]


def claim_files(root: Path, scale: str) -> list[Path]:
    """reference/<scale>/*.claims.json, by study."""
    return sorted(ref_dir(root, scale).glob("*.claims.json"))


def claim_records(root: Path, scale: str) -> list[dict]:
    """The claim records ({study, title, claims}) of reference/<scale>/, by study."""
    return [json.loads(f.read_text()) for f in claim_files(root, scale)]


def derived_claims(root: Path, scale: str) -> dict[str, dict]:
    """{derived scale: {(study, claim id): claim}} for the budget-sweep references beside reference/<scale>/."""
    return {name: {(r["study"], c.get("id")): c for r in claim_records(root, name) for c in r["claims"]}
            for name in derived_scales(root, scale)}


def write_summary(root: Path, scale: str = "mini") -> Path:
    from .. import tables

    out = ref_dir(root, scale)
    derived = derived_claims(root, scale)
    text = tables.summary_markdown(claim_records(root, scale), scale, derived=derived)
    stamps = [json.loads(f.with_name(f.name.replace(".claims.json", ".stamp.json")).read_text())
              for sc in (scale, *derived) for f in claim_files(root, sc)]
    # the CPU column: references are compared where they were made (verify), and a derived scale's verdict
    # beside the mini's is only a budget effect where both came from the same CPU
    lines = ["", "## Stamps", "", "| study | scale | config hash | code hash | commit | CPU |", "|---|---|---|---|---|---|"]
    lines += [f"| {s['study']} | {s['scale']} | {s['config_hash']} | {s['code_hash']} | {s['git_commit']} | "
              f"{s['machine']['cpu']} ({s['machine'].get('cpu_isa', '?')}) |" for s in stamps]
    (out / "summary.md").write_text(text + "\n".join(lines) + "\n")
    return out / "summary.md"


def stale(root: Path, study: str, scale: str = "mini") -> str | None:
    """One line saying why a study's reference does not match its current code/config, else None."""
    path = ref_dir(root, scale) / f"{study}.stamp.json"
    if not path.exists():
        return f"{study}: no reference results in reference/{scale}/; create them: make reference STUDY={study}"
    stamp = json.loads(path.read_text())
    now = hashes(root, study, scale)
    diff = [f"{k} {stamp.get(k)} -> {v}" for k, v in now.items() if stamp.get(k) != v]
    if diff:
        return f"{study}: reference/{scale} is stale ({'; '.join(diff)}); refresh: make reference STUDY={study}"
    return None


def _kernels(m: dict) -> str:
    """The torch CPU kernels a machine record ran: the pinned capability, else the CPU's ISA."""
    cap = m.get("aten_cpu_capability", "unset")
    return cap if cap != "unset" else m.get("cpu_isa", "unrecorded")


def kernel_mismatch(root: Path, study: str, scale: str = "mini") -> str | None:
    """One line when the reference ran other kernels than this machine runs now (or did not record them):
    torch's own (ATEN_CPU_CAPABILITY), then the BLAS / oneDNN / OpenBLAS pins (core/numeric_pin.py)."""
    path = ref_dir(root, scale) / f"{study}.stamp.json"
    if not path.exists():
        return None
    ref_m, now_m = json.loads(path.read_text())["machine"], machine()
    ref, now = _kernels(ref_m), _kernels(now_m)
    if ref != now:
        return (f"{study}: the reference ran torch's {ref} CPU kernels, this run {now}; trained numbers may differ for "
                f"that reason alone (ATEN_CPU_CAPABILITY selects the kernels)")
    ref_pin, now_pin = ref_m.get("numeric_pin"), now_m.get("numeric_pin", {})
    if ref_pin is None:
        # measured: on an AMD Zen 2 the pins give the bits of no pins; on an AVX-512 Xeon MKL's AVX2 cap changes a
        # float32 matmul. A pre-pin stamp is another path only where the CPU (model or ISA) is another
        ref_cpu, now_cpu = (ref_m.get("cpu"), ref_m.get("cpu_isa")), (now_m["cpu"], now_m.get("cpu_isa"))
        if ref_cpu != now_cpu:
            return (f"{study}: the reference predates the BLAS pin and ran on another CPU ({ref_m.get('cpu')}, "
                    f"{ref_m.get('cpu_isa', 'ISA unrecorded')}; this run {now_m['cpu']}, {now_m.get('cpu_isa')}): its "
                    "MKL picked kernels by CPU, so trained numbers may differ")
        return None
    # a pin added later (numpy's dispatch cap) changes nothing on a CPU without what it caps (no AVX-512)
    ref_pin = {**({"NPY_DISABLE_CPU_FEATURES": now_pin.get("NPY_DISABLE_CPU_FEATURES")}
                  if ref_m.get("cpu_isa") != "avx512" else {}), **ref_pin}
    diff = [f"{k} {ref_pin.get(k, 'unset')} (reference) vs {v}" for k, v in now_pin.items() if ref_pin.get(k, "unset") != v]
    if diff:
        return (f"{study}: the reference ran other pinned kernels ({'; '.join(diff)}); trained numbers may differ for "
                f"that reason alone")
    return None


# Metrics that time the run (CPU / wall seconds, per-step or per-token times and their ratios) measure the machine
# and its load, not the method: `make verify` never compares them. The studies name them this way (e.g.
# cpu_seconds, train_cpu_s, search_wall_s, step_time_ratio, wall_ms_per_token); a study's `verify.ignore` adds more.
TIMING_METRIC = re.compile(r"(^|_)(cpu|wall|seconds|step_time)(_|$)|_s$")


def is_timing(metric: str) -> bool:
    return bool(TIMING_METRIC.search(str(metric)))


def comparison(root: Path, study: str, scale: str = "mini") -> dict:
    """results/<scale>/tables/<study>.* against its reference: the rows only one side has, the compared numbers
    that differ (beyond the study's `verify.tolerance`), how many numbers were compared, the verdicts that differ."""
    import pandas as pd

    root = Path(root)
    ref, new = ref_dir(root, scale), root / "results" / scale / "tables"
    for d in (ref, new):
        if not (d / f"{study}.csv").exists():
            raise UserError(f"no {d / (study + '.csv')}")
    spec = icfg.load_study(root, study).get("verify") or {}
    tol, ignore = spec.get("tolerance", {}), set(spec.get("ignore", []))
    a, b = pd.read_csv(ref / f"{study}.csv"), pd.read_csv(new / f"{study}.csv")
    keys = ["method", "setting", "metric"]
    m = a.merge(b, on=keys, how="outer", suffixes=("_ref", "_new"), indicator=True)
    one_side = [(r.method, r.setting, r.metric, "reference" if r._merge == "left_only" else "the new run")
                for r in m[m._merge != "both"].itertuples()]
    compared, differ = 0, []
    for r in m[m._merge == "both"].itertuples():
        if r.metric in ignore or is_timing(r.metric):
            continue
        compared += 1
        t = float(tol.get(r.metric, tol.get("default", 0.0)))
        x, y = r.mean_ref, r.mean_new
        if not ((pd.isna(x) and pd.isna(y)) or abs(x - y) <= t):
            differ.append((r.method, r.setting, r.metric, x, y, t))
    va = {c["id"]: c["verdict"] for c in json.loads((ref / f"{study}.claims.json").read_text())["claims"]}
    vb = {c["id"]: c["verdict"] for c in json.loads((new / f"{study}.claims.json").read_text())["claims"]}
    verdicts = [(k, va.get(k), vb.get(k)) for k in sorted(set(va) | set(vb)) if va.get(k) != vb.get(k)]
    return {"one_side": one_side, "compared": compared, "differ": differ, "verdicts": verdicts,
            "claims": len(set(va) | set(vb))}


def compare(root: Path, study: str, scale: str = "mini") -> list[str]:
    """Differences between results/<scale>/tables/<study>.* and its reference (empty when they agree)."""
    return differences(study, comparison(root, study, scale))


def differences(study: str, c: dict) -> list[str]:
    """One line per difference of a `comparison`."""
    out = [f"{study}: {m}/{s}/{k} only in {side}" for m, s, k, side in c["one_side"]]
    out += [f"{study}: {m}/{s}/{k} mean {x!r} (reference) vs {y!r} (new)" + (f", tolerance {t}" if t else ", expected identical")
            for m, s, k, x, y, t in c["differ"]]
    out += [f"{study}: claim {k} {x} (reference) vs {y} (new)" for k, x, y in c["verdicts"]]
    return out


def _largest_relative(differ: list) -> float | None:
    rel = [abs(x - y) / max(abs(x), abs(y)) for *_, x, y, _ in differ
           if x == x and y == y and max(abs(x), abs(y)) > 0]  # x == x: not NaN
    return max(rel) if rel else None


def verify_report(root: Path, compared: dict[str, dict | None], scale: str = "mini") -> Path:
    """results/<scale>/verify.md: per study, whether this run reproduced its reference, on which machines, from
    `verify`'s comparisons (study -> its `comparison`, None where the reference is stale or missing). Written by
    `icml25 verify`, so a clean clone's verify can be committed beside the references it checked."""
    root, here = Path(root), machine()
    rows = []
    for study, c in compared.items():
        if c is None:
            rows.append(f"| {study} | – | – | – | – | – | stale or missing: `make reference STUDY={study}` |")
            continue
        stamp = json.loads((ref_dir(root, scale) / f"{study}.stamp.json").read_text())
        ref_m = stamp["machine"]
        same_cpu = ref_m.get("cpu") == here["cpu"]
        rel = _largest_relative(c["differ"])
        verdicts = ", ".join(f"`{k}` {x} -> {y}" for k, x, y in c["verdicts"]) or "none"
        ok = not (c["differ"] or c["one_side"] or c["verdicts"])
        result = ("identical" if ok else "verdicts differ" if c["verdicts"] else "numbers differ, same verdicts")
        rows.append(f"| {study} | {ref_m.get('cpu', '?')} ({'same CPU' if same_cpu else 'another CPU'}), "
                    f"{stamp['git_commit'][:10]} | {c['compared']} | {len(c['differ']) + len(c['one_side'])} | "
                    + (f"{rel:.2g}" if rel is not None else "–") + f" | {verdicts} | {result} |")
    head = [f"# Verify ({scale} scale)", "",
            f"This run's tables against `reference/{scale}/` (written by `icml25 verify`). This machine: {here['cpu']}, "
            f"{here['cores']} cores, torch {here['torch']}, numpy {here['numpy']}, CPU {here['cpu_isa']} with torch "
            f"kernels {here['aten_cpu_capability']}, {mkl_text(here)}. Timing metrics are never compared; numbers: the table's means.",
            "", "| study | reference: CPU, commit | numbers compared | differ | largest relative difference | "
            "verdicts that differ (reference -> this run) | result |", "|---|---|---|---|---|---|---|"]
    out = root / "results" / scale / "verify.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(head + rows) + "\n")
    return out
