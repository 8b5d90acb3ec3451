"""Orchestration, above both training and rendering: sweeps over seeds and configs (local
processes or a Ray cluster), their tables, the orbit census across sweeps, and the orbit search
research script. Training never imports this package; it imports both sides (docs/sweeps.md)."""
