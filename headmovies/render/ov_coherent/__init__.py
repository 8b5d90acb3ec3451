"""OV-coherent superposition (source 004): analyses, figures, movie, report, command."""
