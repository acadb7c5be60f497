"""Finding the direct beam: its centre and radius, and how it wanders over the scan
(`find_beam`, which returns a `Beam`).

One quick pass over a sparse, even sample of the frames (read through `PickUDF` with a ROI,
so only those frames are read, with the dataset's corrections), then numpy and
scipy.ndimage on the frames in memory:

1. Hot pixels. The detector's own stand out in the per-pixel median of the frames (above
   all 8 neighbours by more than half the beam's contrast: a disk's edge pixel always has
   neighbours inside the disk, a hot one has none); a frame's own (a cosmic ray) stand
   above all neighbours in that frame by more than the whole contrast, which no disk pixel
   of a few counts does. Each is replaced by the median of its neighbours. Left in, one
   such pixel outweighs a small disk in a centre of mass or a radial profile. Where the
   median does not show the beam (frames of a few sparse counts, where single counts
   would be called hot; a beam that wanders over more than its diameter), the mean is
   used, and frames keep their own.
2. A threshold halfway between the background (the median of the pixels below the
   threshold, iterated: a beam stop's shadow or a disk that fills most of the frame do not
   move it much, where a percentile of the whole frame would) and the plateau (the
   brightest pixel of the repaired mean frame: a flat top at the dtype's maximum for a
   saturated disk).
3. The beam is the brightest (summed above the threshold) of the connected regions above
   it at least half as large as the largest (hot pixels and noise make small ones;
   diffracted disks of the beam's size are dimmer). Its centre is the centre of mass of
   the intensity above the background over that region, grown to the region above a
   tenth of the contrast and 2 px more, so that the blurred edge of a wandering beam in
   the mean frame and the anti-aliased edge of a disk count evenly on all sides:
   sub-pixel, where the threshold mask's own centroid moves in whole pixels. The same for
   each sampled frame, with the mean frame's threshold.
   Where a beam stop's shadow (pixels of the mean frame darker than half the background)
   or the frame's edge cuts the disk, the centre of mass leans away from the cut: first
   only pixels whose mirror image through the centre is seen too count (iterated), then
   the centre is that of the circle through the edge that is seen (rays from the centre,
   smoothed, the points next to the shadow or off the frame left out, least squares
   without the points far off the circle). Up to about half of the disk may be hidden.
4. The radius is where the azimuthal mean profile falls to half height: the edge itself,
   not the threshold area, which moves with the level. Of the profile around each frame's
   own centre (which a wandering beam does not blur) and the mean frame's around the
   centre, the one with the sharper edge: the first unless single frames are too sparse
   for good centres.
"""

from __future__ import annotations

from ltdask.beam._find import find_beam
from ltdask.beam._result import Beam

__all__ = ["Beam", "find_beam"]
