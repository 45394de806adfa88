"""Environments: gymnasium ids (mini: CartPole-v1, Pendulum-v1) and DeepMind Control (full: "dmc:<domain>-<task>",
e.g. dmc:humanoid-run, dmc:dog-run) behind one small reset/step interface, with action repeat for DMC."""
from __future__ import annotations

import numpy as np

from icml25.core.errors import UserError


class Spec:
    def __init__(self, obs_dim, discrete, n_actions=0, act_dim=0, low=None, high=None):
        self.obs_dim, self.discrete, self.n_actions, self.act_dim = obs_dim, discrete, n_actions, act_dim
        self.low, self.high = low, high


class GymEnv:
    def __init__(self, env_id: str, seed: int):
        try:
            import gymnasium as gym
        except ImportError:
            raise UserError("sparse_drl needs gymnasium: pip install gymnasium==1.3.0") from None
        self.env = gym.make(env_id)
        self._seed = int(seed)
        self._first = True
        sp = self.env.action_space
        obs_dim = int(np.prod(self.env.observation_space.shape))
        if hasattr(sp, "n"):
            self.spec = Spec(obs_dim, True, n_actions=int(sp.n))
        else:
            self.spec = Spec(obs_dim, False, act_dim=int(np.prod(sp.shape)), low=sp.low.astype(np.float32),
                             high=sp.high.astype(np.float32))
        self.env.action_space.seed(self._seed)

    def reset(self):
        obs, _ = self.env.reset(seed=self._seed if self._first else None)
        self._first = False
        return np.asarray(obs, dtype=np.float32).reshape(-1)

    def step(self, action):
        obs, r, term, trunc, _ = self.env.step(action)
        return np.asarray(obs, dtype=np.float32).reshape(-1), float(r), bool(term), bool(trunc)


class DMCEnv:
    """dm_control suite task with flattened observations, actions in [-1, 1] and action repeat.
    DMC tasks never terminate; episodes are truncated at 1000 physics steps (time limit)."""

    def __init__(self, name: str, seed: int, action_repeat: int = 2):
        import os

        os.environ.setdefault("MUJOCO_GL", "disable")  # no rendering: state observations only
        try:
            from dm_control import suite
        except ImportError:
            raise UserError("the full scale of sparse_drl needs dm_control: pip install dm_control==1.0.50 mujoco==3.17.0") from None
        domain, task = name.split(":", 1)[1].split("-", 1)
        self.env = suite.load(domain, task.replace("-", "_"), task_kwargs={"random": int(seed)})
        self.repeat = int(action_repeat)
        a = self.env.action_spec()
        obs_dim = int(sum(np.prod(v.shape) for v in self.env.observation_spec().values()))
        self.spec = Spec(obs_dim, False, act_dim=int(np.prod(a.shape)), low=a.minimum.astype(np.float32),
                         high=a.maximum.astype(np.float32))

    @staticmethod
    def _flat(obs):
        return np.concatenate([np.asarray(v, dtype=np.float32).reshape(-1) for v in obs.values()])

    def reset(self):
        return self._flat(self.env.reset().observation)

    def step(self, action):
        total, ts = 0.0, None
        for _ in range(self.repeat):
            ts = self.env.step(action)
            total += float(ts.reward or 0.0)
            if ts.last():
                break
        # a time-limit end is a truncation, not a terminal state (discount stays 1)
        return self._flat(ts.observation), total, False, bool(ts.last())


def make_env(name: str, seed: int, action_repeat: int = 1):
    if name.startswith("dmc:"):
        return DMCEnv(name, seed, action_repeat)
    return GymEnv(name, seed)
