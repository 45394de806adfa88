"""One CKKS interface, two backends: an exact slot simulator and real SEAL CKKS (tenseal.sealapi).

Every kernel in this study is written once against `Backend`; both backends share the counting code
(`Backend._count`), so a kernel's op counts are the same by construction on both and any difference in the
numbers comes from CKKS noise alone (tests check both).

Counted per executed operation: `rot` (key switches of rotations: a step without its own Galois key is done
as one power-of-two rotation per set bit, never counted as one), `rot_calls` (logical rotations asked for),
`pmult`, `cmult` (ciphertext x ciphertext incl. relinearisation), `add`, `rescale`, `modswitch`, `enc`
(ciphertexts the client encrypts and sends) and `depth` (the deepest multiplicative level reached).

Scale management (SEAL): every plaintext is encoded at scale q_l * Delta / ct.scale, where q_l is the prime the
following rescale drops, so after the rescale the ciphertext is back at exactly Delta; adds never see
mismatched scales.
"""
from __future__ import annotations

import math
from collections import Counter
from contextlib import contextmanager

import numpy as np

from icml25.core.errors import UserError

OPS = ("rot", "rot_calls", "pmult", "cmult", "add", "rescale", "modswitch", "enc")


def popcount(k: int) -> int:
    return bin(int(k)).count("1")


class Ct:
    """A ciphertext handle: backend payload, multiplicative level (rescales so far)."""

    __slots__ = ("data", "level")

    def __init__(self, data, level: int = 0):
        self.data = data
        self.level = level


class Backend:
    """Shared counting, key policy and level alignment. Subclasses implement the `_`-prefixed primitives."""

    def __init__(self, slots: int, extra_keys=()):
        if slots & (slots - 1):
            raise UserError(f"ficgcn: slot count must be a power of two, got {slots}")
        self.M = int(slots)
        self.log_m = int(math.log2(slots))
        self.keys = {1 << b for b in range(self.log_m)} | {int(k) % self.M for k in extra_keys}
        self.keys.discard(0)
        self.counts = Counter()
        self.depth = 0
        self._mult = 1

    # -- counting -------------------------------------------------------------------------------------
    def _count(self, op: str, n: int = 1) -> None:
        self.counts[op] += n * self._mult

    @contextmanager
    def multiplicity(self, n: int):
        """Count every op n times: the kernel runs on one ciphertext that stands for n ciphertexts with the
        same (data-independent) schedule. Used only where executing every column ciphertext would not fit
        the budget; the numbers of the other n-1 are then not computed."""
        old, self._mult = self._mult, self._mult * int(n)
        try:
            yield
        finally:
            self._mult = old

    def snapshot(self) -> dict:
        out = {op: int(self.counts.get(op, 0)) for op in OPS}
        out["depth"] = int(self.depth)
        return out

    def add_keys(self, steps) -> None:
        """Galois keys for these rotation steps (the client generates them; a real backend regenerates)."""
        new = {int(k) % self.M for k in steps} - self.keys - {0}
        if new:
            self.keys |= new
            self._keys_changed()

    def _keys_changed(self) -> None:
        pass

    # -- the interface ----------------------------------------------------------------------------------
    def encrypt(self, vec) -> Ct:
        vec = np.asarray(vec, dtype=float)
        if vec.shape != (self.M,):
            raise ValueError(f"expected {self.M} slots, got {vec.shape}")
        self._count("enc")
        return Ct(self._encrypt(vec), 0)

    def decrypt(self, ct: Ct) -> np.ndarray:
        return np.asarray(self._decrypt(ct), dtype=float)[: self.M]

    def rotate(self, ct: Ct, k: int) -> Ct:
        """Left rotation: out[i] = in[(i + k) mod M]."""
        k = int(k) % self.M
        if k == 0:
            return ct
        self._count("rot_calls")
        if k in self.keys:
            self._count("rot")
            return Ct(self._rotate(ct, k), ct.level)
        out = ct
        for b in range(self.log_m):  # only power-of-two keys: one key switch per set bit
            if (k >> b) & 1:
                self._count("rot")
                out = Ct(self._rotate(out, 1 << b), out.level)
        return out

    def pmult(self, ct: Ct, vec) -> Ct:
        """ct * plaintext vector, then rescale (one level)."""
        vec = np.asarray(vec, dtype=float)
        self._count("pmult")
        self._count("rescale")
        out = Ct(self._pmult(ct, vec), ct.level + 1)
        self.depth = max(self.depth, out.level)
        return out

    def square(self, ct: Ct) -> Ct:
        self._count("cmult")
        self._count("rescale")
        out = Ct(self._square(ct), ct.level + 1)
        self.depth = max(self.depth, out.level)
        return out

    def add(self, a: Ct | None, b: Ct | None) -> Ct:
        if a is None:
            return b
        if b is None:
            return a
        if a.level != b.level:  # bring the shallower one down (no noise, no key switch)
            self._count("modswitch")
            if a.level < b.level:
                a = Ct(self._modswitch(a, b.level), b.level)
            else:
                b = Ct(self._modswitch(b, a.level), a.level)
        self._count("add")
        return Ct(self._add(a, b), a.level)


class Simulator(Backend):
    """Exact slot vectors (numpy): rotation = np.roll, masks = plaintext vectors. Ideal CKKS, no noise."""

    name = "simulator"

    def _encrypt(self, vec):
        return vec.copy()

    def _decrypt(self, ct):
        return ct.data

    def _rotate(self, ct, k):
        return np.roll(ct.data, -k)

    def _pmult(self, ct, vec):
        return ct.data * vec

    def _square(self, ct):
        return ct.data * ct.data

    def _modswitch(self, ct, level):
        return ct.data

    def _add(self, a, b):
        return a.data + b.data


class Seal(Backend):
    """Real CKKS through Microsoft SEAL 4 (tenseal.sealapi), single thread.

    `levels` rescales are available; `scale_bits` is log2 Delta. `secure=True` asks SEAL to enforce 128-bit
    security (HE standard bound on the modulus for the ring), which caps the levels at N = 8192.

    `seed` (an int) seeds SEAL's Blake2xb PRNG, which draws the keys and the encryption noise, so a run's
    decrypted logits are the same bits every time; None keeps SEAL's default (seeded from the OS), as a
    deployment must: a seeded PRNG is for reproducible research numbers, not for secrecy."""

    name = "seal"

    def __init__(self, ring: int = 8192, levels: int = 4, scale_bits: int = 30, edge_bits: int = 50,
                 secure: bool = True, extra_keys=(), seed: int | None = None):
        try:
            import tenseal.sealapi as S
        except ImportError:
            raise UserError("ficgcn: the SEAL backend needs tenseal (pip install tenseal==0.3.18)") from None
        super().__init__(ring // 2, extra_keys)
        self.S = S
        p = S.EncryptionParameters(S.SCHEME_TYPE.CKKS)
        p.set_poly_modulus_degree(ring)
        p.set_coeff_modulus(S.CoeffModulus.Create(ring, [edge_bits] + [scale_bits] * levels + [edge_bits]))
        if seed is not None:
            p.set_random_generator(S.Blake2xbPRNGFactory([int(seed) % 2**64] + [0] * 7))
        sec = S.SEC_LEVEL_TYPE.TC128 if secure else S.SEC_LEVEL_TYPE.NONE
        self.ctx = S.SEALContext(p, True, sec)
        if not self.ctx.parameters_set():
            raise UserError(f"ficgcn: SEAL rejects ring {ring} with {levels} levels of {scale_bits} bits "
                            f"({self.ctx.parameters_error_message()}); lower the depth or set secure: false")
        self.delta = 2.0 ** scale_bits
        self.levels = levels
        self.kg = S.KeyGenerator(self.ctx)
        pk = S.PublicKey()
        self.kg.create_public_key(pk)
        self.rk = S.RelinKeys()
        self.kg.create_relin_keys(self.rk)
        self.encryptor = S.Encryptor(self.ctx, pk)
        self.decryptor = S.Decryptor(self.ctx, self.kg.secret_key())
        self.ev = S.Evaluator(self.ctx)
        self.encoder = S.CKKSEncoder(self.ctx)
        self._keys_changed()

    def _keys_changed(self):
        S = self.S
        self.gk = S.GaloisKeys()
        elts = self.ctx.key_context_data().galois_tool().get_elts_from_steps(sorted(self.keys))
        self.kg.create_galois_keys(elts, self.gk)

    def _plain(self, vec, ct_data, scale):
        pt = self.S.Plaintext()
        self.encoder.encode([float(v) for v in vec], ct_data.parms_id(), scale, pt)
        return pt

    def _last_prime(self, ct_data) -> float:
        cd = self.ctx.get_context_data(ct_data.parms_id())
        return float(cd.parms().coeff_modulus()[-1].value())

    def _encrypt(self, vec):
        pt = self.S.Plaintext()
        self.encoder.encode([float(v) for v in vec], self.delta, pt)
        ct = self.S.Ciphertext()
        self.encryptor.encrypt(pt, ct)
        return ct

    def _decrypt(self, ct):
        pt = self.S.Plaintext()
        self.decryptor.decrypt(ct.data, pt)
        return self.encoder.decode_double(pt)

    def _check_level(self, ct):
        if ct.level >= self.levels:
            raise UserError(f"ficgcn: the kernel needs more than the {self.levels} levels the SEAL context has; "
                            "raise seal.levels")

    def _rotate(self, ct, k):
        out = self.S.Ciphertext()
        self.ev.rotate_vector(ct.data, k, self.gk, out)
        return out

    def _pmult(self, ct, vec):
        self._check_level(ct)
        q = self._last_prime(ct.data)
        pt = self._plain(vec, ct.data, q * self.delta / ct.data.scale)
        out = self.S.Ciphertext()
        self.ev.multiply_plain(ct.data, pt, out)
        self.ev.rescale_to_next_inplace(out)
        out.scale = self.delta  # exact up to float rounding by the choice of the plaintext scale
        return out

    def _square(self, ct):
        self._check_level(ct)
        out = self.S.Ciphertext()
        self.ev.square(ct.data, out)
        self.ev.relinearize_inplace(out, self.rk)
        self.ev.rescale_to_next_inplace(out)
        return out

    def _modswitch(self, ct, level):
        out = self.S.Ciphertext()
        self.ev.mod_switch_to_next(ct.data, out)
        for _ in range(level - ct.level - 1):
            self.ev.mod_switch_to_next_inplace(out)
        return out

    def _add(self, a, b):
        if abs(a.data.scale / b.data.scale - 1) > 1e-9:
            raise RuntimeError(f"scale mismatch {a.data.scale} vs {b.data.scale}")
        b.data.scale = a.data.scale
        out = self.S.Ciphertext()
        self.ev.add(a.data, b.data, out)
        return out
