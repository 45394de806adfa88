"""W1, the spatial watermark: Gaussian Shading with ChaCha20 (the official `Gaussian_Shading_chacha`).

A k-bit message w of shape (C/ch, H/h, W/w) is tiled ch x h x w times over the latent (torch `repeat`
semantics: the whole block repeats), packed to bytes and encrypted with ChaCha20 (32-byte key, 12-byte
nonce) into a pseudo-uniform bit map m. Each latent coordinate is drawn from N(0, 1) truncated to the
half-line that m selects, so z_T is marginally N(0, I) ("performance-lossless"). Detection decrypts
sign(z_T_hat) and takes a majority vote over the copies (ties go to 0, as in the official vote).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class GaussianShading:
    shape: tuple  # latent shape (C, H, W)
    factors: tuple  # (ch, h, w) copies along each axis
    key: bytes
    nonce: bytes
    message: np.ndarray  # {0,1}^(C/ch, H/h, W/w), uint8

    @classmethod
    def from_seed(cls, shape, factors, seed: int) -> "GaussianShading":
        """Key, nonce and message drawn from one seeded generator: the official code draws them with
        get_random_bytes / torch.randint once and saves them (w1.pth); a seed makes the run reproducible."""
        c, h, w = (int(x) for x in shape)
        fc, fh, fw = (int(x) for x in factors)
        if c % fc or h % fh or w % fw:
            raise ValueError(f"latent {shape} is not divisible by the copy factors {factors}")
        rng = np.random.default_rng([int(seed), 0x6A55])
        key = rng.integers(0, 256, 32, dtype=np.uint8).tobytes()
        nonce = rng.integers(0, 256, 12, dtype=np.uint8).tobytes()
        message = rng.integers(0, 2, (c // fc, h // fh, w // fw), dtype=np.uint8)
        return cls((c, h, w), (fc, fh, fw), key, nonce, message)

    @property
    def k(self) -> int:
        return int(self.message.size)

    @property
    def copies(self) -> int:
        return int(np.prod(self.factors))

    def spread(self) -> np.ndarray:
        """s = tile(w) over the latent (uint8, shape (C, H, W))."""
        return np.tile(self.message, self.factors)

    def _cipher(self):
        from Crypto.Cipher import ChaCha20

        return ChaCha20.new(key=self.key, nonce=self.nonce)

    def encrypt(self, bits: np.ndarray) -> np.ndarray:
        out = self._cipher().encrypt(np.packbits(bits.astype(np.uint8).ravel()).tobytes())
        return np.unpackbits(np.frombuffer(out, dtype=np.uint8))[: bits.size].reshape(bits.shape)

    def decrypt(self, bits: np.ndarray) -> np.ndarray:
        out = self._cipher().decrypt(np.packbits(bits.astype(np.uint8).ravel()).tobytes())
        return np.unpackbits(np.frombuffer(out, dtype=np.uint8))[: bits.size].reshape(bits.shape)

    def bitmap(self) -> np.ndarray:
        """m = ChaCha20(s): the secret bit map (C, H, W) that sets the signs of z_T."""
        return self.encrypt(self.spread())

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n watermarked latents (n, C, H, W), float32: z_i ~ N(0,1) truncated to (-inf, 0] where m_i = 0 and
        to [0, inf) where m_i = 1 (scipy truncnorm between norm.ppf(j/2) and norm.ppf((j+1)/2), j = m_i)."""
        from scipy.stats import norm, truncnorm

        m = np.broadcast_to(self.bitmap(), (n, *self.shape)).astype(np.int64)
        edges = norm.ppf(np.array([0.0, 0.5, 1.0]))
        z = truncnorm.rvs(edges[m], edges[m + 1], random_state=rng)
        return np.asarray(z, dtype=np.float32).reshape(n, *self.shape)

    def vote(self, spread_bits: np.ndarray) -> np.ndarray:
        """Majority vote over the ch*h*w copies of each bit; a tie (exactly half) counts as 0, as the official
        `diffusion_inverse` (votes <= copies // 2 -> 0)."""
        c, h, w = self.message.shape
        fc, fh, fw = self.factors
        b = spread_bits.reshape(-1, fc, c, fh, h, fw, w)
        votes = b.sum(axis=(1, 3, 5))
        return (votes > self.copies // 2).astype(np.uint8) if self.copies > 1 else votes.astype(np.uint8)

    def decode_bits(self, m_hat: np.ndarray) -> np.ndarray:
        """Messages (n, k) recovered from bit maps m_hat (n, C, H, W): decrypt, then vote."""
        m_hat = np.asarray(m_hat).reshape(-1, *self.shape)
        return np.stack([self.vote(self.decrypt(x))[0].ravel() for x in m_hat])

    def bit_accuracy(self, m_hat: np.ndarray) -> np.ndarray:
        """Per latent: mean(w_hat == w) over the k message bits (score 1 of the detector)."""
        return (self.decode_bits(m_hat) == self.message.ravel()[None]).mean(axis=1)

    def tpr_threshold(self, fpr: float) -> float:
        """The analytic bit-accuracy threshold of a single-user test, FPR(tau) = betainc(i+1, k-i, 0.5), as
        the official Evaluator (reported beside the empirical TPR@1%FPR)."""
        from scipy.special import betainc

        k = self.k
        for i in range(k):
            if betainc(i + 1, k - i, 0.5) <= fpr:
                return i / k
        return 1.0
