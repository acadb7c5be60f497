"""`ltdask.find_beam` (issue 36): the direct beam's centre, radius and wander, on scans
drawn here (disks anti-aliased by supersampling each pixel, at sub-pixel centres, so that
half a pixel is a meaningful tolerance), with Poisson noise, hot pixels, saturated disks,
beam stops and a beam that moves across the scan; bad input raises clear errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.badinput import expect, report

import ltdask
from ltdask import DataSetError

NAV = (8, 8)


@pytest.fixture(scope="module", autouse=True)
def report_table(request):
    """Print every bad-input case's exception at the end of the module."""
    yield from report(request)


def coverage(size: int, cy: float, cx: float, r: float, sub: int = 4) -> np.ndarray:
    """The fraction of each pixel's area inside the circle (`sub` × `sub` samples)."""
    out = np.zeros((size, size))
    y0, y1 = max(int(cy - r) - 2, 0), min(int(cy + r) + 3, size)
    x0, x1 = max(int(cx - r) - 2, 0), min(int(cx + r) + 3, size)
    offsets = (np.arange(sub) + 0.5) / sub - 0.5
    yy = np.arange(y0, y1)[:, None, None, None] + offsets[:, None]
    xx = np.arange(x0, x1)[None, :, None, None] + offsets
    out[y0:y1, x0:x1] = ((yy - cy) ** 2 + (xx - cx) ** 2 <= r * r).mean(axis=(2, 3))
    return out


def draw_scan(
    rng,
    size: int,
    centre: tuple[float, float],
    r: float,
    slope=(0.0, 0.0),
    plateau: float = 200.0,
    background: float = 5.0,
    hot: int = 5,
    saturate: bool = False,
    stop=None,
):
    """An 8×8 uint16 scan of a disk whose centre moves by `slope` px per scan step (y
    along scan_y, x along scan_x, about the scan's middle), Poisson counts, `hot` pixels
    of 20000 to 65535 counts in every frame, optionally saturated (counts × 1000, clipped
    at 65535: a flat top) and a beam stop (`stop`: the frame's pixels it hides); returns
    the scan and the true centres ``nav + (2,)``."""
    iy, ix = np.mgrid[: NAV[0], : NAV[1]]
    ty = centre[0] + slope[0] * (iy - (NAV[0] - 1) / 2)
    tx = centre[1] + slope[1] * (ix - (NAV[1] - 1) / 2)
    mean = np.empty((*NAV, size, size))
    for j, i in np.ndindex(NAV):
        mean[j, i] = background + plateau * coverage(size, ty[j, i], tx[j, i], r)
    if stop is not None:
        mean[(Ellipsis, *stop)] = 0.0
    data = rng.poisson(mean).astype(np.float64)
    if saturate:
        data = np.minimum(data * 1000, 65535)
    y, x = rng.integers(0, size, (2, hot))
    data[..., y, x] = rng.integers(20000, 65536, hot)
    return data.astype(np.uint16), np.stack([ty, tx], axis=-1)


def truth_at(beam, centres: np.ndarray) -> np.ndarray:
    """The true centres of the frames `beam` sampled, in its order."""
    return centres[tuple(beam.positions.T)]


def _cases(n: int = 20):
    """`n` scans: radius 3 to 60 px, the centre anywhere the disk and its travel fit in
    the frame (128 px, or 256 px for radii over 28), plateaus of 30 to 500 counts over a
    background of 0 to 10, the beam moving up to 0.6 px per scan step along each axis,
    every other scan saturated."""
    rng = np.random.default_rng(36)
    cases = []
    for k in range(n):
        r = float(rng.uniform(3, 60))
        size = 128 if r <= 28 else 256
        slope = tuple(rng.uniform(-0.6, 0.6, 2))
        margin = r + 0.6 * 4 + 3
        centre = tuple(rng.uniform(margin, size - margin, 2))
        kw = dict(
            plateau=float(rng.uniform(30, 500)),
            background=float(rng.uniform(0, 10)),
            saturate=k % 2 == 1,
        )
        name = f"{k:02d}-r{r:.0f}-{size}px" + ("-saturated" if kw["saturate"] else "")
        cases.append(pytest.param(k, size, centre, r, slope, kw, id=name))
    return cases


@pytest.mark.parametrize(("seed", "size", "centre", "r", "slope", "kw"), _cases())
def test_centre_and_radius(seed, size, centre, r, slope, kw):
    """Centre within 0.5 px of the true centres' mean, radius within 1 px, each sampled
    frame's centre within 0.5 px of its own."""
    data, centres = draw_scan(np.random.default_rng(seed), size, centre, r, slope, **kw)
    beam = ltdask.find_beam(ltdask.from_array(data))
    assert beam.frames == beam.found == 64
    expected = centres.reshape(-1, 2).mean(axis=0)
    assert abs(beam.cy - expected[0]) < 0.5 and abs(beam.cx - expected[1]) < 0.5, beam
    assert abs(beam.r - r) < 1, (beam, r)
    assert np.abs(beam.centres - truth_at(beam, centres)).max() < 0.5


@pytest.mark.parametrize(
    ("slope", "r"),
    [
        pytest.param((1.5, -1.0), 9.0, id="less-than-the-diameter"),
        pytest.param((3.0, 0.5), 5.0, id="four-radii"),
    ],
)
def test_wander_is_followed(slope, r):
    """A beam moving linearly across the scan (10.5 px end to end along scan_y, less than
    its diameter, or 21 px, four times its radius, where the mean frame holds a streak),
    sampled on a grid of 4×4 frames: each sampled centre follows it within 0.5 px, the
    centre is their mean, the wander the farthest from it, the radius the disk's."""
    rng = np.random.default_rng(1)
    data, centres = draw_scan(rng, 96, (47.3, 50.8), r, slope=slope)
    beam = ltdask.find_beam(ltdask.from_array(data), frames=16)
    assert beam.frames == 16
    # the grid takes both ends of each scan axis
    assert sorted(set(beam.positions[:, 0])) == [0, 2, 5, 7]
    assert sorted(set(beam.positions[:, 1])) == [0, 2, 5, 7]
    true = truth_at(beam, centres)
    assert np.abs(beam.centres - true).max() < 0.5
    assert np.abs(np.array([beam.cy, beam.cx]) - true.mean(axis=0)).max() < 0.5, beam
    far = np.hypot(*(true - true.mean(axis=0)).T).max()
    assert abs(beam.wander - far) < 0.5
    mapped = beam.centre_map()
    assert np.isnan(mapped[1, 1]).all()
    np.testing.assert_allclose(mapped[7, 0], centres[7, 0], atol=0.5)
    assert abs(beam.r - r) < 1, beam


def test_sparse_counts():
    """Frames of half a count per disk pixel: no frame alone shows the disk, the mean of
    64 does: its centre and radius come from it."""
    data, centres = draw_scan(
        np.random.default_rng(6), 96, (45.3, 43.4), 8.0, plateau=0.5, background=0.01
    )
    beam = ltdask.find_beam(ltdask.from_array(data))
    assert abs(beam.cy - 45.3) < 0.5 and abs(beam.cx - 43.4) < 0.5, beam
    assert abs(beam.r - 8) < 1, beam


@pytest.mark.parametrize(
    ("centre", "r", "stop"),
    [
        pytest.param((40.3, 70.6), 3.0, np.s_[50:60, :], id="bar-below-small-disk"),
        pytest.param((60.2, 64.7), 20.0, np.s_[:, 90:], id="right-third-dark"),
        pytest.param((64.5, 63.2), 40.0, np.s_[108:, :], id="bar-under-large-disk"),
        pytest.param((80.4, 40.9), 12.0, np.s_[:70, 60:68], id="rod-beside-the-disk"),
        pytest.param((64.4, 64.2), 10.0, np.s_[:64, 60:68], id="rod-to-the-centre"),
        pytest.param((40.3, 50.2), 8.0, np.s_[:, 47:50], id="wire-across-the-disk"),
        pytest.param((70.6, 55.1), 15.0, np.s_[:, 58:61], id="wire-off-the-centre"),
        pytest.param((60.2, 64.7), 20.0, np.s_[:, 75:], id="a-fifth-of-the-disk-hidden"),
        pytest.param((64.5, 63.2), 40.0, np.s_[90:, :], id="a-tenth-of-a-large-disk-hidden"),
    ],
)
def test_beam_stop(centre, r, stop):
    """A beam stop's shadow (zero counts) crossing the frame beside the disk, a narrow rod
    or wire across it or a shadow over part of it moves neither the centre nor the
    radius."""
    data, centres = draw_scan(
        np.random.default_rng(7),
        128,
        centre,
        r,
        (0.3, -0.2),
        plateau=100.0,
        background=8.0,
        stop=stop,
    )
    assert (data[(Ellipsis, *stop)] == 0).mean() > 0.99  # the shadow is there
    beam = ltdask.find_beam(ltdask.from_array(data))
    expected = centres.reshape(-1, 2).mean(axis=0)
    assert np.abs(np.array([beam.cy, beam.cx]) - expected).max() < 0.5, beam
    assert abs(beam.r - r) < 1, beam
    assert np.abs(beam.centres - truth_at(beam, centres)).max() < 0.5


@pytest.mark.parametrize(
    ("centre", "r"),
    [
        pytest.param((5.3, 60.2), 12.0, id="top-edge"),
        pytest.param((0.5, 40.2), 5.0, id="centre-on-the-first-row"),
        pytest.param((60.3, 122.6), 12.0, id="right-edge"),
        pytest.param((1.3, 60.2), 3.0, id="small-disk-at-the-top"),
    ],
)
def test_disk_cut_by_the_frame(centre, r):
    """A disk partly off the frame (up to half of it, the centres of some frames off it):
    the centre and radius of the whole disk, from the edge that is on the frame."""
    data, centres = draw_scan(
        np.random.default_rng(8), 128, centre, r, (0.3, -0.2), plateau=100.0, background=8.0
    )
    beam = ltdask.find_beam(ltdask.from_array(data))
    expected = centres.reshape(-1, 2).mean(axis=0)
    assert np.abs(np.array([beam.cy, beam.cx]) - expected).max() < 0.5, beam
    assert abs(beam.r - r) < 1, beam
    assert np.abs(beam.centres - truth_at(beam, centres)).max() < 0.5


def test_diffracted_disks_of_the_beams_size():
    """Four diffracted disks a little larger than the beam (8.5 px against 8) at 65 % of
    its height, above the threshold too, over more pixels: the beam is the brightest."""
    rng = np.random.default_rng(9)
    mean = 5 + 200 * coverage(128, 64.3, 60.7, 8.0)
    for dy, dx in [(-30, 0), (30, 0), (0, -30), (0, 30)]:
        mean += 130 * coverage(128, 64.3 + dy, 60.7 + dx, 8.5)
    data = rng.poisson(mean, (4, 4, 128, 128)).astype(np.uint16)
    beam = ltdask.find_beam(ltdask.from_array(data))
    assert abs(beam.cy - 64.3) < 0.5 and abs(beam.cx - 60.7) < 0.5, beam
    assert np.abs(beam.centres - (64.3, 60.7)).max() < 0.5
    assert abs(beam.r - 8) < 1, beam


def test_gaps_without_values():
    """NaN pixels (a detector's gap, two columns across the disk) and an infinite one
    count as dark, as a shadow: the centre and radius stay."""
    data, centres = draw_scan(np.random.default_rng(10), 96, (40.4, 47.3), 10.0, hot=0)
    data = data.astype(np.float32)
    data[..., :, 47:49] = np.nan
    data[..., 10, 10] = np.inf
    beam = ltdask.find_beam(ltdask.from_array(data))
    assert abs(beam.cy - 40.4) < 0.5 and abs(beam.cx - 47.3) < 0.5, beam
    assert abs(beam.r - 10) < 1, beam


def test_hot_pixels_beside_a_small_disk():
    """Hot pixels touching a disk of radius 3 (one of 60000 counts, one at the dtype's
    maximum) are repaired before they weigh in the centre of mass: without that, the
    first alone moves the centre by about 4 px."""
    rng = np.random.default_rng(3)
    data, centres = draw_scan(rng, 64, (30.3, 30.7), 3.0, hot=0)
    data[..., 30, 34] = 60000
    data[..., 26, 30] = 65535
    beam = ltdask.find_beam(ltdask.from_array(data))
    assert abs(beam.cy - 30.3) < 0.5 and abs(beam.cx - 30.7) < 0.5, beam
    assert abs(beam.r - 3) < 1, beam


def test_hot_pixels_of_single_frames():
    """Hot pixels that differ from frame to frame (cosmic rays: three per frame anywhere,
    and one touching the disk of radius 4) do not move the frames' centres."""
    rng = np.random.default_rng(5)
    data, centres = draw_scan(rng, 64, (33.6, 29.2), 4.0, slope=(0.4, 0.3), hot=0)
    for j, i in np.ndindex(NAV):
        y, x = rng.integers(0, 64, (2, 3))
        data[j, i, y, x] = rng.integers(20000, 65536, 3)
        angle = rng.uniform(0, 2 * np.pi)
        ty, tx = centres[j, i]
        data[j, i, round(ty + 5 * np.sin(angle)), round(tx + 5 * np.cos(angle))] = 50000
    beam = ltdask.find_beam(ltdask.from_array(data))
    assert np.abs(beam.centres - truth_at(beam, centres)).max() < 0.5
    assert abs(beam.r - 4) < 1, beam


def test_sparse_sample_reads_few_frames():
    """The default 64 frames of a 32×32 scan: an 8×8 grid over it, ends included; a ROI
    samples only its positions."""
    from ltdask.io.synthetic import synthetic_scan

    scan, shifts = synthetic_scan((32, 32), (64, 64))
    ds = ltdask.from_array(scan)
    beam = ltdask.find_beam(ds)
    assert beam.frames == 64 and beam.nav_shape == (32, 32)
    assert sorted(set(beam.positions[:, 0])) == [0, 4, 9, 13, 18, 22, 27, 31]
    # synthetic_scan's disk: radius 64 / 8 around (32, 32) + the shifts
    true = 32 + shifts[tuple(beam.positions.T)]
    assert np.abs(beam.centres - true).max() < 0.5
    assert abs(beam.r - 8) < 1
    roi = np.zeros((32, 32), dtype=bool)
    roi[3, 5:9] = True
    in_roi = ltdask.find_beam(ds, roi=roi)
    assert in_roi.positions.tolist() == [[3, 5], [3, 6], [3, 7], [3, 8]]


def test_repr_and_plot():
    """The repr says the numbers; the picture is the mean frame with the disk found."""
    from matplotlib.figure import Figure

    data, _ = draw_scan(np.random.default_rng(2), 48, (20.25, 26.5), 6.0, hot=0)
    beam = ltdask.find_beam(ltdask.from_array(data), frames=4)
    assert repr(beam).startswith("Beam(cy=20.2") and "over 4 of 64 frames)" in repr(beam)
    ax = beam.plot(ax=Figure().add_subplot())
    np.testing.assert_allclose(ax.images[0].get_array(), data[::7, ::7].mean(axis=(0, 1)))
    circle = ax.patches[0]
    assert circle.center == (beam.cx, beam.cy) and circle.radius == beam.r
    with pytest.raises(AttributeError):
        beam.cy = 0  # frozen


def test_missing_frames_are_not_sampled():
    """Positions whose frames are not in the files (sync_offset) are left out."""
    data, _ = draw_scan(np.random.default_rng(4), 32, (15.5, 16.2), 5.0, hot=0)
    ds = ltdask.from_array(data, sync_offset=40)  # positions 24 to 63 have no frame
    beam = ltdask.find_beam(ds)
    assert beam.frames == 24 and (np.ravel_multi_index(tuple(beam.positions.T), NAV) < 24).all()
    assert abs(beam.cy - 15.5) < 0.5 and abs(beam.cx - 16.2) < 0.5


# -- bad input ------------------------------------------------------------------------------------
BAD = [
    pytest.param(
        np.zeros((4, 4, 32, 32), np.uint16),
        {},
        DataSetError,
        r"<array>: the 16 frames sampled are blank \(every pixel 0\): no beam to find",
        id="blank-zeros",
    ),
    pytest.param(
        np.full((4, 4, 32, 32), 7.5, np.float32),
        {},
        DataSetError,
        r"frames sampled are blank \(every pixel 7.5\)",
        id="blank-constant",
    ),
    pytest.param(
        np.random.default_rng(0).poisson(5, (4, 4, 32, 32)).astype(np.uint16),
        {},
        DataSetError,
        r"no beam stands out of the background in the 16 frames sampled",
        id="noise-only",
    ),
    pytest.param(
        np.zeros((4, 4, 32), np.float32),
        {"sig_dims": 1},
        DataSetError,
        r"find_beam needs 2-D frames, this scan's are \(32,\) \(1 signal dims\)",
        id="one-dim-frames",
    ),
    pytest.param(
        np.ones((4, 4, 8, 8), np.complex64),
        {},
        DataSetError,
        r"find_beam needs real intensities, this scan holds complex64",
        id="complex",
    ),
    pytest.param(
        np.zeros((4, 4, 2, 8, 8), np.float32),
        {"sig_dims": 3},
        DataSetError,
        r"find_beam needs 2-D frames, this scan's are \(2, 8, 8\)",
        id="three-dim-frames",
    ),
]


@pytest.mark.parametrize(("data", "kw", "error", "match"), BAD)
def test_bad_scans(request, data, kw, error, match):
    expect(request, error, match, ltdask.find_beam, ltdask.from_array(data, **kw))


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        pytest.param({"frames": 0}, ValueError, r"frames=0; expected a positive", id="frames-0"),
        pytest.param({"frames": 2.5}, ValueError, r"frames=2.5; expected", id="frames-float"),
        pytest.param(
            {"roi": np.zeros((8, 8), bool)},
            DataSetError,
            r"no frames to find the beam in: none of the positions in the ROI",
            id="roi-empty",
        ),
        pytest.param(
            {"roi": np.ones((3, 3), bool)},
            ltdask.UDFError,
            r"roi of shape \(3, 3\)",
            id="roi-wrong-shape",
        ),
    ],
)
def test_bad_arguments(request, kw, error, match):
    data, _ = draw_scan(np.random.default_rng(0), 32, (16.0, 16.0), 4.0, hot=0)
    expect(request, error, match, ltdask.find_beam, ltdask.from_array(data), **kw)


def test_repair_takes_the_median_of_the_other_neighbours():
    """A hot pixel becomes the median of its neighbours inside the frame that are not hot
    themselves (numpy's median of the same pixels, listed by hand; an even number of
    them for the corner beside another hot pixel)."""
    from ltdask.beam._find import _repair

    frame = np.arange(25, dtype=np.float64).reshape(5, 5) ** 1.5
    hot = np.array([[0, 2, 2, 4, 4], [0, 2, 3, 4, 3]])
    expected = {
        (0, 0): [(0, 1), (1, 0), (1, 1)],
        (2, 2): [(1, 1), (1, 2), (1, 3), (2, 1), (3, 1), (3, 2), (3, 3)],
        (2, 3): [(1, 2), (1, 3), (1, 4), (2, 4), (3, 2), (3, 3), (3, 4)],
        (4, 4): [(3, 3), (3, 4)],
        (4, 3): [(3, 2), (3, 3), (3, 4), (4, 2)],
    }
    out = _repair(frame, hot)
    for (y, x), pixels in expected.items():
        assert out[y, x] == np.median([frame[p] for p in pixels]), (y, x)
    untouched = np.ones(frame.shape, dtype=bool)
    untouched[tuple(hot)] = False
    assert (out[untouched] == frame[untouched]).all()
