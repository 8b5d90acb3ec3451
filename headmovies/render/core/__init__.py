"""What every experiment renders with: reader -> circuits -> projections -> panels -> encoder."""
