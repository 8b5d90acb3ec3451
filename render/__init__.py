"""Rendering side: reads only the run file (numpy, h5py, matplotlib; never torch or pipeline/)."""
