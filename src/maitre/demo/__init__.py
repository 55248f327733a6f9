"""`maitre demo`: the seeds' story, offline and deterministic, through the real runtime."""

from .story import (
    CHAPTERS,
    WAITING,
    DemoWorld,
    build_toolbox,
    console_agent,
    demo_agent,
    run_story,
    scripted_model,
)

__all__ = [
    "CHAPTERS",
    "DemoWorld",
    "WAITING",
    "build_toolbox",
    "console_agent",
    "demo_agent",
    "run_story",
    "scripted_model",
]
