"""The `deepinv` fixture for this study's tests (imported by them; a conftest.py here would shadow tests/conftest.py for
the `from conftest import ...` of other modules): deepinv imported beside a stub torchvision where the real one is missing (the CPU
torch 2.13 here has none; deepinv imports it at import time, and neither DEAL nor DRUNet calls it)."""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from unittest import mock

import pytest


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = mock.MagicMock(name=f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _TorchvisionStub(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """deepinv imports torchvision at import time; the CPU torch 2.13 here has no working torchvision, and
    the DEAL model never calls it, so a stub module stands in for the import only."""

    def find_spec(self, name, path, target=None):
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        m.__version__ = "0.0"
        return m

    def exec_module(self, module):
        pass


@pytest.fixture(scope="module")
def deepinv():
    try:
        import torchvision  # noqa: F401
        stub = None
    except Exception:
        for k in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
            del sys.modules[k]
        stub = _TorchvisionStub()
        sys.meta_path.insert(0, stub)
    try:
        dinv = pytest.importorskip("deepinv")
        yield dinv
    finally:
        if stub is not None:
            sys.meta_path.remove(stub)
            # leave no stub torchvision behind: later tests (bood's VOS loader) ask whether torchvision exists
            for k in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
                del sys.modules[k]
