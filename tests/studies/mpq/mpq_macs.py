"""MACs of every searchable conv (and the fc) of an mpq `Net`, counted from forward hooks on the real modules:
weight elements (cout * cin/groups * kh * kw) times the output map H_out * W_out. Shared by the faithfulness
and full-scale tests as the independent count the BitOPs are checked against."""
from __future__ import annotations

import torch


def hooked_macs(net, image: int, channels: int) -> dict[str, int]:
    names = {L["name"].replace(".", "_"): L["name"] for L in net.specs}
    macs, hooks = {}, []
    for key, mod in list(net.layers.items()) + [("fc", net.fc)]:
        def hook(m, inp, out, name=names[key]):
            macs[name] = int(m.conv.weight.numel() * out.shape[2] * out.shape[3])
        hooks.append(mod.register_forward_hook(hook))
    net.eval()
    with torch.no_grad():
        net(torch.rand(1, channels, image, image))
    for h in hooks:
        h.remove()
    return macs
