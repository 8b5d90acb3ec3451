"""The orbit experiment (seed 000): orbit check, panel choice, colours, movie, figures, command."""
