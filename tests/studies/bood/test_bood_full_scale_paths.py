"""The full-scale code paths of bood, on tiny local stand-ins: the Stable Diffusion decoder (a randomly
initialised pipeline saved with save_pretrained, the layout CompVis/stable-diffusion-v1-4 is loaded from)
and the CIFAR ResNet-18/34 backbones the full config names."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from icml25.studies.bood.models import ConvNet, make_net

PROMPT = "A high-quality photo of a {}"


def _tiny_sd(dest: Path) -> Path:
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    # CLIP's byte-level BPE alphabet (printable bytes as themselves, the rest shifted past 255) and merges
    # that make "object" one token, as it is in SD's real vocabulary
    keep = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars = [chr(b) for b in keep] + [chr(256 + i) for i in range(256 - len(keep))]
    merges = ["o b", "ob j", "obj e", "obje c", "objec t</w>"]
    vocab = chars + [c + "</w>" for c in chars] + ["ob", "obj", "obje", "objec", "object</w>",
                                                    "<|startoftext|>", "<|endoftext|>"]
    (dest / "tok").mkdir(parents=True)
    (dest / "tok" / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}))
    (dest / "tok" / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    tok = CLIPTokenizer(str(dest / "tok" / "vocab.json"), str(dest / "tok" / "merges.txt"), model_max_length=32)
    torch.manual_seed(0)
    n = len(vocab)
    enc = CLIPTextModel(CLIPTextConfig(vocab_size=n, hidden_size=32, intermediate_size=37, num_attention_heads=4,
                                       num_hidden_layers=2, max_position_embeddings=32, bos_token_id=n - 2,
                                       eos_token_id=n - 1, pad_token_id=n - 1))
    unet = UNet2DConditionModel(block_out_channels=(32, 64), layers_per_block=1, sample_size=8, in_channels=4,
                                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=32,
                                norm_num_groups=8, attention_head_dim=4)
    vae = AutoencoderKL(block_out_channels=(16, 32), in_channels=3, out_channels=3, latent_channels=4,
                        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                        norm_num_groups=8)
    sched = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                          set_alpha_to_one=False, steps_offset=1)
    StableDiffusionPipeline(vae=vae, text_encoder=enc, tokenizer=tok, unet=unet, scheduler=sched, safety_checker=None,
                            feature_extractor=None, requires_safety_checker=False).save_pretrained(dest / "sd")
    return dest / "sd"


@pytest.fixture(scope="module")
def sd(tmp_path_factory):
    pytest.importorskip("diffusers")
    from icml25.studies.bood.decoder import StableDiffusionDecoder

    return StableDiffusionDecoder(str(_tiny_sd(tmp_path_factory.mktemp("sd"))), PROMPT, steps=2, size=16, device="cpu")


def test_sd_anchors_are_the_class_names_token_embeddings(sd):
    got = sd.token_embeddings(["object", "ob"])
    tok, emb = sd.pipe.tokenizer, sd.pipe.text_encoder.get_input_embeddings().weight.detach().numpy()
    ids = [tok(n, add_special_tokens=False).input_ids[0] for n in ("object", "ob")]
    assert got.shape == (2, 32) and np.array_equal(got, emb[ids])


def test_sd_decoding_the_placeholders_own_embedding_is_the_plain_prompt(sd):
    """The feature goes in place of the placeholder's token embedding and nowhere else: with the token's
    own embedding the decoded image is the pipeline's image for the text prompt, bit for bit."""
    own = sd.token_embeddings(["object"])
    img = sd.decode(own, seed=3)
    ref = sd.pipe(prompt=PROMPT.format("object"), num_inference_steps=2, guidance_scale=sd.guidance, height=16,
                  width=16, generator=torch.Generator("cpu").manual_seed(3), output_type="np").images[0]
    assert img.shape == (1, 3, 16, 16) and img.dtype == np.float32
    assert np.array_equal(img[0], np.transpose(ref, (2, 0, 1)))
    assert not np.array_equal(sd.decode(own + 1.0, seed=3), img)   # another feature, another image


def test_sd_feature_changes_the_text_states_from_its_position_on_only(sd):
    from icml25.studies.bood.decoder import _encode_with_token

    tok, enc = sd.pipe.tokenizer, sd.pipe.text_encoder
    ids = tok(PROMPT.format("object"), padding="max_length", max_length=tok.model_max_length,
              return_tensors="pt").input_ids
    pos = int((ids[0] == tok("object", add_special_tokens=False).input_ids[0]).nonzero()[0, 0])
    with torch.no_grad():
        plain = enc(input_ids=ids)[0]
        swapped = _encode_with_token(enc, ids, pos, torch.randn(32))
        again = enc(input_ids=ids)[0]
    assert torch.equal(plain, again)                           # the hook is removed after use
    assert torch.equal(swapped[0, :pos], plain[0, :pos])        # causal text encoder: earlier tokens unchanged
    assert (swapped[0, pos:] - plain[0, pos:]).abs().amax(-1).min() > 1e-4


@pytest.mark.parametrize("arch,params", [("resnet18", 11_173_962), ("resnet34", 21_282_122)])
def test_cifar_resnets_have_the_reference_parameter_counts(arch, params):
    """The CIFAR ResNet-18/34 (3x3 stem, no max-pool) with a 10-class head: 11,173,962 and 21,282,122
    parameters, as the widely used CIFAR implementations count them; 512-d pooled features at 32x32."""
    net = make_net({"arch": arch}, 3, 32, 10)
    assert sum(p.numel() for p in net.parameters()) == params
    assert net.features(torch.zeros(2, 3, 32, 32)).shape == (2, 512) and net.fc.in_features == 512


def test_convnet_spec_builds_the_mini_network_unchanged():
    torch.manual_seed(0)
    a = make_net({"widths": [8, 16], "hidden": 32}, 1, 16, 10)
    torch.manual_seed(0)
    b = ConvNet(1, 16, (8, 16), 32, 10)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    with pytest.raises(ValueError, match="unknown arch"):
        make_net({"arch": "vit"}, 1, 16, 10)


def _resnet_params_by_formula(blocks, classes: int, stem_kernel: int) -> int:
    """Parameters of a BasicBlock ResNet counted by hand: convs without bias, BatchNorm = 2 per channel,
    a 1x1 conv + BN shortcut where the shape changes, a 512 -> classes linear head."""
    total, c = stem_kernel * stem_kernel * 3 * 64 + 2 * 64, 64
    for i, (n, w) in enumerate(zip(blocks, (64, 128, 256, 512))):
        for j in range(n):
            total += 9 * c * w + 2 * w + 9 * w * w + 2 * w
            if c != w or (i > 0 and j == 0):
                total += c * w + 2 * w
            c = w
    return total + 512 * classes + classes


def test_imagenet_resnet34_stem_and_parameter_count():
    """`stem: imagenet` is torchvision's layout: 7x7 stride-2 conv + 3x3 stride-2 max-pool (224 -> 56 before
    the first stage). Its ResNet-34 with 100 classes has 21,335,972 parameters, the hand count; with 1,000
    classes 21,797,672, the number torchvision documents for resnet34."""
    net = make_net({"arch": "resnet34", "stem": "imagenet"}, 3, 224, 100)
    n = sum(p.numel() for p in net.parameters())
    assert n == _resnet_params_by_formula((3, 4, 6, 3), 100, 7) == 21_335_972
    big = make_net({"arch": "resnet34", "stem": "imagenet"}, 3, 224, 1000)
    assert sum(p.numel() for p in big.parameters()) == 21_797_672
    assert _resnet_params_by_formula((3, 4, 6, 3), 10, 3) == 21_282_122          # the formula on the CIFAR net
    with torch.no_grad():
        assert net.body[:4](torch.zeros(1, 3, 224, 224)).shape == (1, 64, 56, 56)
        net.eval()
        assert net.features(torch.zeros(1, 3, 64, 64)).shape == (1, 512) and net(torch.zeros(1, 3, 64, 64)).shape == (1, 100)
    cifar = make_net({"arch": "resnet34"}, 3, 224, 100)                       # the default stays the CIFAR stem
    assert cifar.body[0].kernel_size == (3, 3) and not any(isinstance(m, torch.nn.MaxPool2d) for m in cifar.modules())
    with pytest.raises(ValueError, match="unknown ResNet stem"):
        make_net({"arch": "resnet34", "stem": "vit"}, 3, 224, 100)
