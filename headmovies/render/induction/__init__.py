"""Induction heads (source 003): numpy forward pass and analyses, figures, movie, report, command."""
