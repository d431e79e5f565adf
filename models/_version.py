"""The one place the version is written (pyproject.toml reads it too)."""
__version__ = "0.1.0"
