"""What every experiment renders with: reader -> circuits -> projections -> frame states -> panels -> encoder."""
