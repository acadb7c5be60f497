"""The version of ltdask (one source: pyproject reads it from here)."""

__version__ = "0.1.0.dev0"
