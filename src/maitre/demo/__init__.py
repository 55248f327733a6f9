"""`maitre demo`: the seeds' story, offline and deterministic, through the real runtime."""

from .story import (
    CHAPTERS,
    HOSTED_LIMITS,
    LOCAL_LIMITS,
    WAITING,
    DemoWorld,
    build_toolbox,
    console_agent,
    demo_agent,
    demo_limits,
    run_story,
    scripted_model,
)

__all__ = [
    "CHAPTERS",
    "DemoWorld",
    "HOSTED_LIMITS",
    "LOCAL_LIMITS",
    "WAITING",
    "build_toolbox",
    "console_agent",
    "demo_agent",
    "demo_limits",
    "run_story",
    "scripted_model",
]
