"""Numba decoders of the compressed chunks detectors write, shared by the file readers and
the live streams: LZ4 blocks (`lz4`), bit shuffling (`bitshuffle`) and the HDF5 filters'
chunks built from them (`filters`: bitshuffle-LZ4, filter 32008; LZ4, filter 32004). Each
kernel checks every length and offset it reads against the ends of its buffers."""
