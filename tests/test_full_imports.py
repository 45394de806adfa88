"""The full scale's imports on the current install, and the pins of the full-scale install (envs/full-gpu*.txt).

One test per (study, full-scale import): the study's own module, then the third-party module / names its full
path imports lazily. On the CPU install (make install) some cannot work: a package that only envs/full-gpu*.txt
installs is missing, or torchvision's C++ ops do not register beside the CPU torch. Those tests skip with the
missing piece and "needs envs/full-gpu.txt", so `pytest -ra` lists the gap. Anything else fails: an error in
icml25's own code (a SyntaxError, a missing icml25 module, a name that moved), a third-party ImportError of a
name (a version that does not match the pins), or a missing module that no envs/full-gpu*.txt pins.

The imports run in one child process (fresh sys.modules: no test's stub torchvision leaks in, torch imported once).
`role` "full" is the full-scale code path itself; "reference" is a library the full scale is checked against
(timm for ttfs's EVA-02, pytorch-ood as a whole for bood); "server" is a process the full scale talks to
(ralu's and code_review's `vllm serve`; code_review's in-process vllm.LLM needs the same package), which lives in
its own venv.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENVS = REPO / "envs"
MAIN, NODEPS, VLLM = ENVS / "full-gpu.txt", ENVS / "full-gpu-nodeps.txt", ENVS / "full-gpu-vllm.txt"

# torch release -> the torchvision release built for it (torchvision's own metadata: 0.28.0 declares
# torch==2.13.0; 0.29.x torch>=2.14.0, and its wheels are built against one torch patch release)
KNOWN_PAIRS = {("2.13.0", "0.28.0"), ("2.14.0", "0.29.0"), ("2.14.1", "0.29.1")}


@dataclass(frozen=True)
class Imp:
    study: str
    owner: str                      # our module where the lazy import lives ("" for none)
    target: str = ""                # "module" or "module:name,name" (the lazy import itself)
    dists: tuple[str, ...] = ()     # the distributions it needs beyond the base install
    role: str = "full"              # full | reference | server

    @property
    def id(self) -> str:
        return f"{self.study}-{self.target or self.owner}"


FULL = [
    Imp("bood", "icml25.studies.bood.decoder", "diffusers:StableDiffusionPipeline", ("diffusers", "transformers")),
    Imp("bood", "icml25.studies.bood.training", "pytorch_ood", ("pytorch-ood", "torchvision"), "reference"),
    Imp("chameleon", "icml25.studies.chameleon.lm", "transformers:GPT2LMHeadModel,PreTrainedTokenizerFast",
        ("transformers", "tokenizers")),
    Imp("chameleon", "icml25.studies.chameleon.data_sources", "pyarrow.parquet", ("pyarrow",)),
    Imp("code_review", "icml25.studies.code_review.engines", "transformers:AutoTokenizer", ("transformers",)),
    Imp("code_review", "icml25.studies.code_review.engines", "vllm:LLM,SamplingParams", ("vllm",), "server"),
    Imp("dbeta", "icml25.studies.dbeta.data_downstream", "wfdb:rdsamp", ("wfdb", "soundfile")),
    Imp("dbeta", "icml25.studies.dbeta.data_downstream", "h5py:File", ("h5py",)),
    Imp("dbeta", "icml25.studies.dbeta.data", "transformers:AutoTokenizer,T5EncoderModel", ("transformers",)),
    Imp("deal", "icml25.studies.deal.drunet", "deepinv.models:DRUNet",
        ("deepinv", "torchvision", "einops", "natsort")),
    Imp("design_select", "icml25.studies.design_select.data_gb1"),
    Imp("ficgcn", "icml25.studies.ficgcn.he", "tenseal.sealapi", ("tenseal",)),
    Imp("gaussmarker", "icml25.studies.gaussmarker.diffusion",
        "diffusers:StableDiffusionPipeline,DDIMInverseScheduler,DPMSolverMultistepScheduler",
        ("diffusers", "transformers")),
    Imp("gradmm", "icml25.studies.gradmm.lm", "transformers:AutoModelForCausalLM,AutoTokenizer", ("transformers",)),
    Imp("lockin", "icml25.studies.lockin.abm", "peft:LoraConfig,get_peft_model", ("peft",)),
    Imp("lockin", "icml25.studies.lockin.data_concepts", "transformers:AutoModel,AutoModelForCausalLM",
        ("transformers",)),
    Imp("lockin", "icml25.studies.lockin.wildchat", "statsmodels.api", ("statsmodels",)),
    Imp("missing_sm", "icml25.studies.missing_sm.study"),
    Imp("mpq", "icml25.studies.mpq.data"),
    Imp("neuralop_width", "icml25.studies.neuralop_width.models", "neuralop.models:FNO", ("neuraloperator",)),
    Imp("neuralop_width", "icml25.studies.neuralop_width.data", "h5py:File", ("h5py",)),
    Imp("ralu", "icml25.studies.ralu.codecheck", "evalplus.data.mbpp:mbpp_deserialize_inputs",
        ("evalplus", "datasets")),
    Imp("ralu", "icml25.studies.ralu.llm", "vllm.entrypoints.openai.api_server", ("vllm",), "server"),
    Imp("sand", "icml25.studies.sand.datasets"),
    Imp("satimp", "icml25.studies.satimp.lm", "transformers:AutoModelForCausalLM,AutoTokenizer", ("transformers",)),
    Imp("sparse_drl", "icml25.studies.sparse_drl.envs", "dm_control:suite", ("dm_control", "mujoco")),
    Imp("tokenswift", "icml25.studies.tokenswift.base", "huggingface_hub:snapshot_download",
        ("huggingface_hub", "safetensors")),
    Imp("tokenswift", "icml25.studies.tokenswift.engine", "transformers:AutoConfig", ("transformers",)),
    Imp("ttfs", "icml25.studies.ttfs.full", "safetensors.torch:load_file", ("safetensors",)),
    Imp("ttfs", "icml25.studies.ttfs.eva02", "timm.models.eva:Eva", ("timm", "torchvision"), "reference"),
]

# top-level module -> distribution, where the names differ
MODULE_DIST = {"neuralop": "neuraloperator", "pytorch_ood": "pytorch-ood", "RNA": "ViennaRNA",
               "skimage": "scikit-image", "PIL": "pillow", "yaml": "pyyaml", "Crypto": "pycryptodome"}

# Run in the child: each entry's owner, then its target; one JSON line per entry.
PROBE = r"""
import importlib, importlib.util, json, sys, traceback

def attempt(what):
    mod, _, names = what.partition(":")
    m = importlib.import_module(mod)
    for n in filter(None, names.split(",")):
        if not hasattr(m, n):   # `from mod import n` of a submodule
            importlib.import_module(f"{mod}.{n}")
        getattr(m, n)

def classify(outer):
    # libraries wrap an import error in their own (diffusers / transformers' lazy modules raise a RuntimeError
    # "Failed to import ..." from it): its explicit causes decide (not __context__: an error raised while
    # handling an ImportError the library had caught is not that ImportError)
    chain, e = [], outer
    while e is not None and len(chain) < 12:
        chain.append(e)
        e = e.__cause__
    tb = traceback.format_exc(limit=-8)
    tv = [x for x in chain if "torchvision::" in str(x)]
    if tv:
        return {"kind": "tv_ops", "msg": str(tv[0]).splitlines()[0], "tb": tb}
    e = next((x for x in chain if isinstance(x, ModuleNotFoundError) and x.name), outer)
    if isinstance(e, ModuleNotFoundError) and e.name:
        top = e.name.split(".")[0]
        try:
            top_installed = top != e.name and importlib.util.find_spec(top) is not None
        except BaseException:
            top_installed = False
        return {"kind": "missing", "module": e.name, "top_installed": top_installed, "tb": tb}
    return {"kind": "error", "msg": f"{type(outer).__name__}: {outer}", "tb": tb}

out = {}
for key, owner, target in json.loads(sys.argv[1]):
    res = {"kind": "ok"}
    for what, stage in ((owner, "owner"), (target, "target")):
        if not what:
            continue
        try:
            attempt(what)
        except BaseException as e:
            res = dict(classify(e), stage=stage, what=what)
            break
    out[key] = res
try:
    import torch
    out["_torch"] = torch.__version__
except BaseException:
    out["_torch"] = "none"
print("PROBE " + json.dumps(out))
"""


def probe(entries: list[tuple[str, str, str]], cwd: Path = REPO, pythonpath: str | None = None) -> dict:
    import os

    env = dict(os.environ, PYTHONWARNINGS="ignore", TRANSFORMERS_VERBOSITY="error", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", PROBE, json.dumps(entries)], capture_output=True, text=True,
                       cwd=cwd, env=env, timeout=240)
    line = [l for l in r.stdout.splitlines() if l.startswith("PROBE ")]
    assert r.returncode == 0 and line, f"the import probe died (rc {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return json.loads(line[-1][6:])


def read_pins(path: Path) -> dict[str, str]:
    """name (normalised) -> version of each `name==version` line; any other non-comment line is an error."""
    pins = {}
    for i, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([A-Za-z0-9.+!_-]+)", line)
        assert m, f"{path.name}:{i}: not an ==-pin: {raw!r}"
        pins[norm(m.group(1))] = m.group(3)
    return pins


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def all_pins() -> dict[str, dict[str, str]]:
    """Each envs/full-gpu*.txt's pins, the main file first, the separate vLLM venv's last."""
    files = sorted(ENVS.glob("full-gpu*.txt"), key=lambda p: (p != MAIN, p == VLLM, p.name))
    return {p.name: read_pins(p) for p in files}


def envs_file_for(dist: str) -> str | None:
    for name, pins in all_pins().items():
        if norm(dist) in pins:
            return name
    return None


def decide(res: dict, torch_version: str) -> tuple[str, str]:
    """('ok' | 'skip' | 'fail', message) for one probe result."""
    kind = res["kind"]
    if kind == "ok":
        return "ok", ""
    where = f"{res['stage']} {res['what']}"
    if kind == "missing":
        top = res["module"].split(".")[0]
        if top == "icml25":
            return "fail", f"{where}: icml25's own module {res['module']} is missing\n{res['tb']}"
        if res.get("top_installed"):
            return "fail", f"{where}: {top} is installed but has no module {res['module']}\n{res['tb']}"
        dist = MODULE_DIST.get(top, top)
        envs = envs_file_for(dist)
        if envs is None:
            return "fail", (f"{where}: module {res['module']} is missing and no envs/full-gpu*.txt pins "
                            f"{dist}\n{res['tb']}")
        hint = "make install-full" if envs != VLLM.name else "make install-vllm, its own venv"
        return "skip", (f"{where}: {dist} is not installed here (pinned in envs/{envs}): "
                        f"needs envs/{envs} ({hint})")
    if kind == "tv_ops":
        return "skip", (f"{where}: torchvision's C++ ops do not register beside torch {torch_version} "
                        f"({res['msg']}): needs envs/full-gpu.txt (its torch / torchvision pair)")
    return "fail", f"{where}: {res['msg']}\n{res['tb']}"


@pytest.fixture(scope="module")
def results() -> dict:
    return probe([(e.id, e.owner, e.target) for e in FULL])


@pytest.mark.parametrize("entry", FULL, ids=[e.id for e in FULL])
def test_full_scale_import(entry: Imp, results):
    verdict, msg = decide(results[entry.id], results["_torch"])
    if verdict == "skip":
        pytest.skip(f"{entry.study} ({entry.role}): {msg}")
    assert verdict == "ok", f"{entry.study}'s full-scale import broke: {msg}"


def test_every_full_scale_dependency_is_pinned():
    missing = sorted({f"{e.study}: {d}" for e in FULL for d in e.dists if envs_file_for(d) is None})
    assert not missing, f"full-scale imports need packages no envs/full-gpu*.txt pins: {missing}"


def test_envs_files_are_pinned_and_torch_pairs_match():
    pins = all_pins()
    assert {MAIN.name, NODEPS.name, VLLM.name} <= set(pins)
    for name, p in pins.items():
        if "torch" in p or "torchvision" in p:
            pair = (p.get("torch"), p.get("torchvision"))
            assert pair in KNOWN_PAIRS, f"{name}: torch / torchvision {pair} is not a known pair: {sorted(KNOWN_PAIRS)}"
    assert "torch" in pins[MAIN.name] and "vllm" not in pins[MAIN.name]
    assert pins[NODEPS.name].keys().isdisjoint(pins[MAIN.name]), "a package is in both the --no-deps and the main file"


def test_full_gpu_pins_agree_with_the_project_and_the_cpu_install():
    """The full env differs from the CPU install only in torch (+ torchvision, the extras): every package both
    pin has one version, and the CPU recipe's pip installs (its --no-deps ones in envs/full-gpu-nodeps.txt)
    are all in the full env."""
    import tomllib

    full = {**all_pins()[MAIN.name], **all_pins()[NODEPS.name]}
    proj = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = proj["dependencies"] + [d for v in proj["optional-dependencies"].values() for d in v]
    proj_pins = {norm(m.group(1)): m.group(2) for d in declared
                 for m in [re.fullmatch(r"([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==(\S+)", d.strip())] if m}
    bad = {n: (v, full[n]) for n, v in proj_pins.items() if n in full and n != "torch" and full[n] != v}
    assert not bad, f"envs/full-gpu*.txt and pyproject.toml pin different versions (project, envs): {bad}"

    make = (REPO / "Makefile").read_text()
    recipe = make.split("$(STAMP): pyproject.toml", 1)[1].split("\n\n", 1)[0]
    nodeps, other = {}, {}
    for line in recipe.splitlines():
        if "pip install" not in line:
            continue
        for n, v in re.findall(r"\s([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line):
            (nodeps if "--no-deps" in line else other)[norm(n)] = v
    assert nodeps and nodeps == all_pins()[NODEPS.name], (
        f"envs/full-gpu-nodeps.txt must list the CPU install's --no-deps packages at its versions: "
        f"Makefile {nodeps}, envs {all_pins()[NODEPS.name]}")
    other.pop("torch", None)
    bad = {n: (v, full.get(n)) for n, v in other.items() if full.get(n) != v}
    assert not bad, f"the CPU recipe installs these at other versions than envs/full-gpu.txt (Makefile, envs): {bad}"


def test_make_install_full_target():
    """install-full is phony, installs the three layers in order with the project constrained by the pins, and
    leaves `install` as it was (its recipe still the CPU one)."""
    make = (REPO / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", make, re.M).group(1).split()
    assert {"install-full", "install-vllm", "install"} <= set(phony)
    r = subprocess.run(["make", "-n", "install-full", "VENV=/nonexistent/venv"], cwd=REPO, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    cmds = r.stdout
    order = ["-r envs/full-gpu.txt", "-c envs/full-gpu.txt", "--no-deps -e .", "--no-deps -r envs/full-gpu-nodeps.txt",
             "torch.version.cuda", "/nonexistent/venv/.installed-full"]
    pos = [cmds.find(s) for s in order]
    assert -1 not in pos and pos == sorted(pos), f"install-full's recipe lacks or misorders {order}:\n{cmds}"
    assert "torch==2.13.0" not in cmds, "install-full must not install the CPU torch"
    assert re.search(r"^install: \$\(STAMP\) system-data system-code-review$", make, re.M)


def test_probe_tells_a_gap_from_a_break(tmp_path):
    """The decision on synthetic modules: a missing pinned package and torchvision's ops error (also wrapped in
    another, as diffusers' lazy imports do) skip; a
    SyntaxError, a missing icml25 module, a missing unpinned package, a missing submodule of an installed package
    and an ImportError of a name fail."""
    mods = {
        "gap_pinned": "raise ModuleNotFoundError(\"No module named 'timm'\", name='timm')\n",
        "gap_pinned_sub": "raise ModuleNotFoundError(\"No module named 'vllm.entrypoints'\", name='vllm.entrypoints')\n",
        "gap_tvops": "raise RuntimeError('operator torchvision::nms does not exist')\n",
        "gap_wrapped": ("try:\n    raise RuntimeError('operator torchvision::nms does not exist')\n"
                        "except RuntimeError as e:\n    raise RuntimeError('Failed to import x') from e\n"),
        "break_syntax": "def f(:\n",
        "break_own": "import icml25.studies.no_such_module\n",
        "break_unpinned": "import no_such_package_xyz\n",
        "break_name": "from json import no_such_name\n",
        "break_submodule": "import json.no_such_submodule\n",
        "fine": "X = 1\n",
    }
    for name, src in mods.items():
        (tmp_path / f"{name}.py").write_text(src)
    res = probe([(n, "", n if n != "fine" else "fine:X") for n in mods], cwd=tmp_path, pythonpath=str(tmp_path))
    got = {n: decide(res[n], res["_torch"])[0] for n in mods}
    assert got == {"gap_pinned": "skip", "gap_pinned_sub": "skip", "gap_tvops": "skip", "gap_wrapped": "skip", "break_syntax": "fail",
                   "break_own": "fail", "break_unpinned": "fail", "break_name": "fail", "break_submodule": "fail",
                   "fine": "ok"}, got
    assert "needs envs/full-gpu.txt" in decide(res["gap_pinned"], res["_torch"])[1]
    assert "needs envs/full-gpu-vllm.txt" in decide(res["gap_pinned_sub"], res["_torch"])[1]
