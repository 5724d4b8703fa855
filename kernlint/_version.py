"""The package version: one place (pyproject.toml reads it), on the ground floor so any layer may import it."""
__version__ = "0.1.0"
