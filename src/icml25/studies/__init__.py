"""One package per paper. Each exposes `STUDY` (an `icml25.core.registry.Study`) from `study.py`."""
