"""OV-coherent superposition (seed 004): analyses, figures, movie, report, command."""
