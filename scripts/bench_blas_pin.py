"""Does the numeric pin change bits on this CPU? Runs one probe per environment in a fresh process (the
variables are read when torch / numpy load their libraries) and prints the sha256 of each probe's output:

  matmul   a 257x129 @ 129x263 float32 torch matmul (MKL sgemm)
  conv     a float32 conv2d forward + backward (oneDNN)
  train    200 AdamW steps of a 2-layer MLP on fixed data (every kernel a small model touches)
  mlp256   CPU s of 300 SGD steps of a 256-wide MLP, batch 256 (what the pin costs)
  numpy    a 300x200 @ 200x310 float64 numpy matmul (numpy's OpenBLAS)

Usage: python scripts/bench_blas_pin.py  (one torch thread; the environments are listed in ENVS)
"""
import hashlib
import json
import os
import subprocess
import sys

PROBE = r"""
import hashlib, json, os
import icml25  # noqa: F401  (sets the pins unless the environment chose)
import numpy as np
import torch
torch.set_num_threads(1)
from icml25.core import numeric_pin
def h(t):
    return hashlib.sha256(np.ascontiguousarray(t.detach().numpy() if hasattr(t, "detach") else t).tobytes()).hexdigest()[:16]
g = torch.Generator().manual_seed(0)
a, b = torch.randn(257, 129, generator=g), torch.randn(129, 263, generator=g)
out = {"matmul": h(a @ b)}
x = torch.randn(4, 3, 32, 32, generator=g, requires_grad=True)
conv = torch.nn.Conv2d(3, 8, 3)
torch.manual_seed(0); conv.reset_parameters()
y = conv(x); y.square().sum().backward()
out["conv"] = h(torch.cat([y.flatten(), x.grad.flatten(), conv.weight.grad.flatten()]))
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 10))
opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
X, Y = torch.randn(256, 32, generator=g), torch.randint(0, 10, (256,), generator=g)
for _ in range(200):
    opt.zero_grad(); torch.nn.functional.cross_entropy(net(X), Y).backward(); opt.step()
out["train"] = h(torch.cat([p.flatten() for p in net.parameters()]))
import time
wide = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 256))
opt, Xw = torch.optim.SGD(wide.parameters(), lr=1e-3), torch.randn(256, 256, generator=g)
t = time.process_time()
for _ in range(300):
    opt.zero_grad(); wide(Xw).square().mean().backward(); opt.step()
out["mlp256_cpu_s"] = round(time.process_time() - t, 3)
rng = np.random.default_rng(0)
out["numpy"] = h(rng.standard_normal((300, 200)) @ rng.standard_normal((200, 310)))
out["read_back"] = numeric_pin.read_back()
print(json.dumps(out))
"""

PINS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "OPENBLAS_CORETYPE")
ENVS = {
    "pinned (import icml25's defaults)": {},
    "no pin at all": {k: "" for k in PINS},
    "torch kernels only (before the BLAS pin)": {k: "" for k in PINS if k != "ATEN_CPU_CAPABILITY"},
    "MKL_CBWR=COMPATIBLE (the Intel == AMD branch; not the default: its cost)": {"MKL_CBWR": "COMPATIBLE"},
    "ATEN_CPU_CAPABILITY=default": {"ATEN_CPU_CAPABILITY": "default"},
}


def run(overrides: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in PINS}
    for k, v in overrides.items():
        env[k] = v  # "" = set but empty: import icml25 leaves a set variable alone, MKL/oneDNN ignore an empty one
    env.setdefault("OMP_NUM_THREADS", "1")
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    from icml25.core import reference

    print(f"CPU: {reference.machine()['cpu']} ({reference.cpu_isa()})")
    base = None
    for name, ov in ENVS.items():
        out = run(ov)
        rb = out.pop("read_back")
        same = "" if base is None else "  same bits as pinned: " + ", ".join(
            f"{k} {'yes' if out[k] == base[k] else 'NO'}" for k in out if not k.endswith("_s"))
        base = base or out
        print(f"{name}: {out}{same}\n    read back: {rb}")
