"""`maitre demo`: the seeds' story, offline and deterministic, through the real runtime."""

from .story import CHAPTERS, DemoWorld, build_toolbox, run_story, scripted_model

__all__ = ["CHAPTERS", "DemoWorld", "build_toolbox", "run_story", "scripted_model"]
