"""Subcommands of `python -m render`, one module each (found automatically)."""
