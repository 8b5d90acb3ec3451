"""Induction heads (seed 003): numpy forward pass and analyses, figures, movie, report, command."""
