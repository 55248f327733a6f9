"""maitre."""
