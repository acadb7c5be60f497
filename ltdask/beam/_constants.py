"""The knobs of the beam search (see the package's notes)."""

#: the region above the threshold is grown by this many pixels before the centre of mass
_GROW = 2
#: radial profile bins (px)
_BIN = 0.5
#: at most this many rounds of balancing a cut disk's centre of mass
_ROUNDS = 30
#: rays from the centre to the edge of a cut disk
_RAYS = 120
