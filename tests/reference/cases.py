"""The LiberTEM reference cases: inputs and UDFs, with numpy only, deterministic.

Imported by ``make_reference.py`` (in LiberTEM's environment, never ltdask) and by
``test_reference.py`` (in ltdask's, never libertem): both build the same datasets, ROIs and
UDFs from this table. What differs between the two sides is passed in as a namespace ``ns``
(``UDF``, ``SumUDF``, …, ``masks``): the custom UDFs below are written once against whichever
``UDF`` base class they are given — LiberTEM code that runs unchanged but for its imports.

A case is ``(case_id, group, udf_key)``; a *group* is ``(dataset_key, roi_key)``, the unit one
``.npz`` file in ``data/udfs/`` holds (all of its cases run in one pass on both sides).
"""

from __future__ import annotations

import math
import os

import numpy as np
from helpers import (
    mibfiles,  # noqa: E402
    rawfiles,  # noqa: E402
)

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")

NAV = (5, 7)
SIG = (16, 12)

# --------------------------------------------------------------------------- datasets


def _rng(key: str) -> np.random.Generator:
    return np.random.default_rng([ord(c) for c in key])


def _memory(key, nav, sig, dtype):
    rng = _rng(key)
    shape = (*nav, *sig)
    if key == "zero-frames":
        data = rng.normal(100, 30, shape).astype(dtype)
        data[0, 0] = 0
        data[1, 2] = 0
        return data
    if np.dtype(dtype).kind == "f":
        return rng.normal(100, 30, shape).astype(dtype)
    return rng.integers(0, 4000, shape).astype(dtype)


#: in-memory datasets: key -> (nav shape, sig shape, dtype)
MEMORY = {
    "f32": (NAV, SIG, "float32"),
    "u16": (NAV, SIG, "uint16"),
    "f64-odd": ((3, 5), (9, 13), "float64"),
    "nav1": ((11,), (8, 10), "float32"),
    "nav3": ((2, 3, 4), (8, 6), "float32"),
    "one-frame": ((1,), SIG, "float32"),
    "zero-frames": ((3, 4), SIG, "float32"),
}

#: raw uint16 files of 30 frames: key -> (nav shape, sync_offset)
RAW = {
    "raw": (NAV[:1] + (6,), 0),
    "raw-sync+3": ((4, 6), 3),
    "raw-sync-4": ((4, 6), -4),
    "raw-sync+4-short": ((5, 6), 4),
    "raw-nav-beyond": ((6, 6), 0),
}
RAW_FRAMES = 30

#: MIB scans: key -> (depth, raw, quad, files, sync_offset, open by)
MIB = {
    "mib-u08-d6": (6, False, False, 1, 0, "mib"),
    "mib-u08-d1": (1, False, False, 1, 0, "mib"),
    "mib-u16-d12": (12, False, False, 1, 0, "mib"),
    "mib-u32-d24": (24, False, False, 1, 0, "mib"),
    "mib-r64-d1": (1, True, False, 1, 0, "mib"),
    "mib-r64-d6": (6, True, False, 1, 0, "mib"),
    "mib-r64-d12": (12, True, False, 1, 0, "mib"),
    "mib-r64-d24": (24, True, False, 1, 0, "mib"),
    "mib-quad-u16": (12, False, True, 1, 0, "mib"),
    "mib-quad-r64-d12": (12, True, True, 1, 0, "mib"),
    "mib-quad-r64-d6": (6, True, True, 1, 0, "mib"),
    "mib-multi3-hdr": (12, False, False, 3, 0, "hdr"),
    "mib-multi3-first": (12, False, False, 3, 0, "mib"),
    "mib-sync+2": (12, False, False, 1, 2, "mib"),
    "mib-sync-3": (12, False, False, 1, -3, "mib"),
    "mib-nav-beyond": (12, False, False, 2, 0, "hdr"),
}
#: MIB scans opened with a nav shape other than the frames they hold (``MIB_NAV``)
MIB_LOAD_NAV = {"mib-nav-beyond": (5, 5)}
MIB_NAV = (4, 5)
MIB_SIG = (16, 16)  # quad: two 7x7 chips plus 2 gap pixels... written without gap


def raw_stream() -> np.ndarray:
    rng = _rng("raw")
    return rng.integers(0, 60000, (RAW_FRAMES, *SIG)).astype("<u2")


def mib_counts(key: str) -> np.ndarray:
    """The counts of a MIB scan: the same for every scan of one counter depth, so that raw and
    integer modes, quad and single chip, one file and several give the same frames."""
    depth = MIB[key][0]
    n = math.prod(MIB_NAV)
    return mibfiles.make_counts(_rng(f"mib-depth-{depth}"), n, MIB_SIG, depth)


def dataset_keys():
    return list(MEMORY) + list(RAW) + list(MIB)


def dataset_load(key: str, workdir: str):
    """``(filetype, kwargs)`` for ``Context.load`` and LiberTEM's ``ctx.load``; writes files."""
    if key in MEMORY:
        nav, sig, dtype = MEMORY[key]
        return "memory", dict(data=_memory(key, nav, sig, dtype), sig_dims=len(sig))
    if key in RAW:
        nav, sync = RAW[key]
        path = os.path.join(workdir, "scan.raw")
        if not os.path.exists(path):
            rawfiles.write_raw(path, raw_stream())
        return "raw", dict(
            path=path, nav_shape=nav, sig_shape=SIG, dtype="uint16", sync_offset=sync
        )
    depth, raw, quad, files, sync, by = MIB[key]
    sub = os.path.join(workdir, key)
    os.makedirs(sub, exist_ok=True)
    counts = mib_counts(key)

    class _Dir(str):
        def __truediv__(self, name):
            return os.path.join(self, name)

    paths = mibfiles.write_scan(_Dir(sub), counts, files=files, depth=depth, raw=raw, quad=quad)
    hdr = os.path.join(sub, "scan.hdr")
    mibfiles.write_hdr(hdr, len(counts), depth=depth)
    path = hdr if by == "hdr" else paths[0]
    nav = MIB_LOAD_NAV.get(key, MIB_NAV)
    return "mib", dict(path=path, nav_shape=nav, sig_shape=MIB_SIG, sync_offset=sync)


def dataset_shape(key: str):
    """(nav shape, sig shape) of a dataset key."""
    if key in MEMORY:
        return MEMORY[key][:2]
    if key in RAW:
        return RAW[key][0], SIG
    return MIB_LOAD_NAV.get(key, MIB_NAV), MIB_SIG


def missing_frames(key: str) -> np.ndarray | None:
    """Flat nav mask of the positions whose frame is not in the files (None: all there)."""
    if key in RAW:
        nav, sync = RAW[key]
        total = RAW_FRAMES
    elif key in MIB:
        nav, sync = MIB_LOAD_NAV.get(key, MIB_NAV), MIB[key][4]
        total = math.prod(MIB_NAV)
    else:
        return None
    frame = np.arange(math.prod(nav)) + sync
    missing = (frame < 0) | (frame >= total)
    return missing if missing.any() else None


# --------------------------------------------------------------------------- ROIs


def roi(kind: str, nav) -> np.ndarray | None:
    n = math.prod(nav)
    if kind == "none":
        return None
    if kind == "random":
        r = _rng("roi" + str(nav)).random(n) < 0.5
        r[0] = True
        return r.reshape(nav)
    if kind == "empty":
        return np.zeros(nav, dtype=bool)
    if kind == "single":
        r = np.zeros(n, dtype=bool)
        r[n // 2] = True
        return r.reshape(nav)
    raise ValueError(kind)


# --------------------------------------------------------------------------- mask factories


def mask_specs(sig):
    """Mask factory calls: name -> (factory, args); LiberTEM's signatures (x first)."""
    h, w = sig
    cy, cx = (h - 1) / 2, (w - 1) / 2
    return {
        "circ-int": ("circular", (w // 2, h // 2, w, h, 4)),
        "circ-frac": ("circular", (cx + 0.3, cy - 0.2, w, h, 3.6)),
        "circ-aa": ("circular", (cx + 0.3, cy - 0.2, w, h, 3.6), dict(antialiased=True)),
        "circ-r0": ("circular", (w // 2, h // 2, w, h, 0)),
        "ring-int": ("ring", (w // 2, h // 2, w, h, 5, 2)),
        "ring-frac": ("ring", (cx - 0.4, cy + 0.7, w, h, 5.5, 2.5)),
        "ring-aa": ("ring", (cx - 0.4, cy + 0.7, w, h, 5.5, 2.5), dict(antialiased=True)),
        "rect": ("rectangular", (2, 3, 5, 4, w, h)),
        "rect-neg": ("rectangular", (7, 9, -3, -4, w, h)),
        "grad-x": ("gradient_x", (w, h)),
        "grad-y": ("gradient_y", (w, h)),
        "grad-x-f64": ("gradient_x", (w, h), dict(dtype=np.float64)),
        "bins-int": ("radial_bins", (w // 2, h // 2, w, h), dict(radius=6, n_bins=3)),
        "bins-frac": (
            "radial_bins",
            (cx + 0.25, cy - 0.5, w, h),
            dict(radius=5.5, radius_inner=1.5, n_bins=4),
        ),
        "bins-fine": ("radial_bins", (w // 2, h // 2, w, h), dict(radius=2, n_bins=4)),
        "bins-auto": ("radial_bins", (cx + 0.1, cy, w, h)),
        "bins-norm": (
            "radial_bins",
            (cx, cy, w, h),
            dict(radius=6, n_bins=3, normalize=True, use_sparse=False),
        ),
        "radial-grad": ("radial_gradient", (w // 2, h // 2, w, h, 5)),
        "radial-grad-frac-aa": (
            "radial_gradient",
            (cx + 0.3, cy - 0.2, w, h, 4.5),
            dict(antialiased=True),
        ),
        "rgbs": (
            "radial_gradient_background_subtraction",
            (np.linspace(0, 8, w * h).reshape(h, w), 3.5, 6.0),
        ),
        "rgbs-delta": (
            "radial_gradient_background_subtraction",
            (np.linspace(0, 8, w * h).reshape(h, w), 3.0, 7.0),
            dict(delta=2.0),
        ),
        "bgsub": ("background_subtraction", (w // 2, h // 2, w, h, 5, 2)),
        "bgsub-frac-aa": (
            "background_subtraction",
            (cx + 0.3, cy - 0.2, w, h, 5.5, 2.5),
            dict(antialiased=True),
        ),
        "balance": ("balance", (np.linspace(-1.0, 3.0, w * h).reshape(h, w),)),
        "bounding-radius": ("bounding_radius", (cx + 0.3, cy - 0.2, w, h)),
    }


def call_mask(masks, spec):
    name, args = spec[0], spec[1]
    kwargs = spec[2] if len(spec) > 2 else {}
    out = getattr(masks, name)(*args, **kwargs)
    if hasattr(out, "todense"):
        out = out.todense()
    return np.asarray(out)


MASK_FACTORY_CASES = [
    (f"mask-{name}-{sig[0]}x{sig[1]}", name, sig)
    for sig in (SIG, (9, 13))
    for name in mask_specs(sig)
]


# --------------------------------------------------------------------------- custom UDFs


def make_udfs(UDF):  # noqa: C901 - one class per documented feature
    """The custom UDF classes, built on `UDF` (``libertem.udf.UDF`` or ``ltdask.UDF``)."""

    class TileSum(UDF):
        """process_tile: the sum of each frame, accumulated over its tiles."""

        def get_result_buffers(self):
            return {"total": self.buffer(kind="nav", dtype="float64")}

        def process_tile(self, tile):
            self.results.total[:] += tile.reshape(tile.shape[0], -1).sum(axis=1)

    class FrameMax(UDF):
        """process_frame with a sig buffer and a custom merge (maximum)."""

        def get_result_buffers(self):
            return {
                "peak": self.buffer(kind="nav", dtype="float32"),
                "maxframe": self.buffer(kind="sig", dtype="float32"),
            }

        def preprocess(self):
            self.results.maxframe[:] = -np.inf

        def process_frame(self, frame):
            self.results.peak[:] = frame.max()
            self.results.maxframe[:] = np.maximum(self.results.maxframe, frame)

        def merge(self, dest, src):
            dest.maxframe[:] = np.maximum(dest.maxframe, src.maxframe)
            dest.peak[:] = src.peak

    class PartitionMean(UDF):
        """process_partition, a single buffer with extra_shape and a summing merge."""

        def get_result_buffers(self):
            return {
                "frame_mean": self.buffer(kind="nav", dtype="float64"),
                "stats": self.buffer(kind="single", extra_shape=(2,), dtype="float64"),
            }

        def process_partition(self, partition):
            flat = partition.reshape(partition.shape[0], -1).astype(np.float64)
            self.results.frame_mean[:] = flat.mean(axis=1)
            self.results.stats[0] += flat.shape[0]
            self.results.stats[1] += flat.sum()

        def merge(self, dest, src):
            dest.frame_mean[:] = src.frame_mean
            dest.stats[:] += src.stats

    class MergeAll(UDF):
        """merge_all: a sig buffer and a single buffer combined in one step."""

        def get_result_buffers(self):
            return {
                "sig_sum": self.buffer(kind="sig", dtype="float64"),
                "count": self.buffer(kind="single", dtype="int64"),
            }

        def process_frame(self, frame):
            self.results.sig_sum[:] += frame
            self.results.count[:] += 1

        def merge(self, dest, src):
            dest.sig_sum[:] += src.sig_sum
            dest.count[:] += src.count

        def merge_all(self, ordered_results):
            sig_sum = np.sum([b.sig_sum for b in ordered_results.values()], axis=0)
            count = np.sum([b.count for b in ordered_results.values()], axis=0)
            return {"sig_sum": sig_sum, "count": count}

    class Derived(UDF):
        """get_results with private and result_only buffers."""

        def get_result_buffers(self):
            return {
                "acc": self.buffer(kind="sig", dtype="float64", use="private"),
                "n": self.buffer(kind="single", dtype="int64", use="private"),
                "mean": self.buffer(kind="sig", dtype="float64", use="result_only"),
                "intensity": self.buffer(kind="nav", dtype="float32"),
            }

        def process_frame(self, frame):
            self.results.acc[:] += frame
            self.results.n[:] += 1
            self.results.intensity[:] = frame.sum()

        def merge(self, dest, src):
            dest.acc[:] += src.acc
            dest.n[:] += src.n
            dest.intensity[:] = src.intensity

        def get_results(self):
            n = max(int(self.results.n[0]), 1)
            return {"mean": self.results.acc / n, "intensity": self.results.intensity}

    class AuxWeights(UDF):
        """aux data: a per-frame weight given as a nav aux buffer."""

        def get_result_buffers(self):
            return {"weighted": self.buffer(kind="nav", dtype="float64")}

        def process_frame(self, frame):
            self.results.weighted[:] = frame.sum() * self.params.weights

    class TaskData(UDF):
        """get_task_data: a mask computed once per task, used in process_frame."""

        def get_task_data(self):
            sig = tuple(self.meta.dataset_shape.sig)
            mask = np.zeros(sig, dtype=np.float64)
            mask[::2] = 1.0
            return {"mask": mask}

        def get_result_buffers(self):
            return {"masked": self.buffer(kind="nav", dtype="float64")}

        def process_frame(self, frame):
            self.results.masked[:] = (frame * self.task_data.mask).sum()

    class Coordinates(UDF):
        """meta.coordinates: the nav coordinates each frame is processed at."""

        def get_result_buffers(self):
            nd = len(self.meta.dataset_shape.nav)
            return {"coords": self.buffer(kind="nav", extra_shape=(nd,), dtype="int64")}

        def process_frame(self, frame):
            self.results.coords[:] = np.asarray(self.meta.coordinates).reshape(-1)

    class Frames(UDF):
        """The frames in their native dtype (USE_NATIVE_DTYPE): what the reader decoded."""

        def get_preferred_input_dtype(self):
            return self.USE_NATIVE_DTYPE

        def get_result_buffers(self):
            sig = tuple(self.meta.dataset_shape.sig)
            return {"frame": self.buffer(kind="nav", extra_shape=sig, dtype=self.meta.input_dtype)}

        def process_frame(self, frame):
            self.results.frame[:] = frame

    return {
        "frames": Frames,
        "tile-sum": TileSum,
        "frame-max": FrameMax,
        "partition-mean": PartitionMean,
        "merge-all": MergeAll,
        "derived": Derived,
        "aux": AuxWeights,
        "task-data": TaskData,
        "coordinates": Coordinates,
    }


def aux_weights(nav):
    return np.linspace(0.5, 2.0, math.prod(nav)).reshape(nav)


def auto_fn(frame):
    return np.asarray([frame.sum(), frame.max()], dtype=np.float64)


def make_udf(key: str, ns: dict, sig, nav):
    """The UDF of `key`, built from the namespace `ns` of one side."""
    masks = ns["masks"]
    h, w = sig
    cy, cx = (h - 1) / 2, (w - 1) / 2
    if key == "sum":
        return ns["SumUDF"]()
    if key == "sum-f64":
        return ns["SumUDF"](dtype="float64")
    if key.startswith("sum-"):
        return ns["SumUDF"](dtype=key[len("sum-") :])
    if key == "sumsig":
        return ns["SumSigUDF"]()
    if key == "stddev":
        return ns["StdDevUDF"]()
    if key == "stddev-f32":
        return ns["StdDevUDF"](dtype="float32")
    if key == "stddev-nonumba":
        return ns["StdDevUDF"](use_numba=False)
    if key == "pick":
        return ns["PickUDF"]()
    if key.startswith("masks-"):
        return _masks_udf(key[len("masks-") :], ns, masks, sig)
    if key.startswith("com-"):
        return _com_udf(key[len("com-") :], ns, cy, cx)
    if key.startswith("custom-"):
        cls = ns["custom"][key[len("custom-") :]]
        if cls.__name__ == "AuxWeights":
            return cls(weights=ns["aux_data"](aux_weights(nav), kind="nav", dtype="float64"))
        return cls()
    raise KeyError(key)


MASK_UDFS = {
    # name: (mask spec names, ApplyMasksUDF keyword arguments)
    "circ-int": (["circ-int"], {}),
    "circ-frac": (["circ-frac"], {}),
    "ring-int": (["ring-int"], {}),
    "ring-frac": (["ring-frac"], {}),
    "ring-aa": (["ring-aa"], {}),
    "rect": (["rect"], {}),
    "grad-xy": (["grad-x", "grad-y"], {}),
    "three": (["circ-int", "ring-frac", "rect"], {}),
    "three-count": (["circ-int", "ring-frac", "rect"], dict(mask_count=3)),
    "no-torch": (["circ-frac", "grad-x"], dict(use_torch=False)),
    "sparse-true": (["circ-int", "ring-int"], dict(use_sparse=True)),
    "sparse-false": (["circ-int", "ring-int"], dict(use_sparse=False)),
    "sparse-scipy": (["circ-int", "ring-int"], dict(use_sparse="scipy.sparse")),
    "sparse-pydata": (["circ-int", "ring-int"], dict(use_sparse="sparse.pydata")),
    "mask-f64": (["grad-x", "circ-frac"], dict(mask_dtype="float64")),
    "mask-u8": (["circ-int", "rect"], dict(mask_dtype="uint8")),
    "pref-f64": (["circ-frac", "grad-y"], dict(preferred_dtype="float64")),
    "pref-f32-mask-f64": (["grad-x"], dict(preferred_dtype="float32", mask_dtype="float64")),
    "shifts": (["circ-int", "ring-int"], dict(shifts=(1, -2))),
    "shifts-sparse": (["circ-int", "ring-int"], dict(shifts=(-1, 1), use_sparse=True)),
    "bins-int": (["bins-int"], {}),
    "bins-frac": (["bins-frac"], {}),
    "stack": (["stack"], {}),
}


def _masks_udf(name, ns, masks, sig):
    names, kwargs = MASK_UDFS[name]
    specs = mask_specs(sig)
    factories = []
    for n in names:
        if n == "stack":
            h, w = sig
            factories.append(
                lambda: np.stack(
                    [call_mask(masks, specs["circ-int"]), call_mask(masks, specs["rect"])]
                ).astype(np.float32)
            )
        elif n.startswith("bins-"):
            spec = specs[n]
            factories.append(lambda spec=spec: getattr(masks, spec[0])(*spec[1], **spec[2]))
        else:
            factories.append(lambda spec=specs[n]: call_mask(masks, spec))
    if name == "stack":
        factories = factories[0]
        kwargs = dict(mask_count=2)
    elif names[0].startswith("bins-"):
        factories = factories[0]
        kwargs = dict(mask_count=specs[names[0]][2]["n_bins"])
    return ns["ApplyMasksUDF"](mask_factories=factories, **kwargs)


COM_UDFS = {
    "default": {},
    "int-r": dict(cy="ci", cx="ci", r=4),
    "frac-r": dict(cy=7.3, cx=5.6, r=4.5),
    "ring-int": dict(cy="ci", cx="ci", r=6, ri=2),
    "ring-frac": dict(cy=7.3, cx=5.6, r=6.5, ri=2.5),
    "r-exact": dict(cy=8, cx=6, r=5),
    "rot": dict(scan_rotation=30.0),
    "flip": dict(flip_y=True),
    "rot-flip": dict(scan_rotation=-75.0, flip_y=True, cy=7.5, cx=5.5, r=6),
    "reg-1": dict(regression=-1),
    "reg0": dict(regression=0),
    "reg1": dict(regression=1),
    "reg-array": dict(regression="array"),
}


def _com_udf(name, ns, cy, cx):
    kwargs = dict(COM_UDFS[name])
    for k in ("cy", "cx"):
        if kwargs.get(k) == "ci":
            kwargs[k] = int(cy if k == "cy" else cx)
    if kwargs.get("regression") == "array":
        kwargs["regression"] = np.array([[0.5, 0.0], [0.01, -0.02], [0.03, 0.01]])
    return ns["CoMUDF"].with_params(**kwargs)


# --------------------------------------------------------------------------- the table

BASIC = ["sum", "sumsig", "stddev", "masks-circ-int", "com-int-r"]
ALL_BUILTIN = (
    ["sum", "sum-f64", "sumsig", "stddev", "stddev-f32", "stddev-nonumba"]
    + [f"masks-{k}" for k in MASK_UDFS]
    + [f"com-{k}" for k in COM_UDFS]
)
CUSTOM = [f"custom-{k}" for k in make_udfs(object)]


def _groups():
    g = {}
    g[("f32", "none")] = ALL_BUILTIN + CUSTOM + ["auto"]
    g[("f32", "random")] = ALL_BUILTIN + CUSTOM + ["auto"]
    g[("f32", "empty")] = ["sum", "sumsig", "stddev", "masks-three", "com-int-r"] + CUSTOM[:3]
    g[("f32", "single")] = BASIC + ["pick"] + CUSTOM
    g[("u16", "none")] = [
        "sum",
        "sum-f64",
        "sum-uint16",
        "sum-uint32",
        "sum-int64",
        "sumsig",
        "stddev",
        "stddev-f32",
        "masks-three",
        "masks-sparse-true",
        "masks-mask-u8",
        "masks-pref-f64",
        "masks-grad-xy",
        "com-frac-r",
        "com-ring-int",
    ] + CUSTOM
    g[("u16", "random")] = BASIC + ["masks-sparse-scipy", "custom-tile-sum"]
    g[("f64-odd", "none")] = BASIC + ["masks-ring-frac", "masks-bins-frac", "com-frac-r"]
    g[("f64-odd", "single")] = BASIC + ["pick"]
    g[("nav1", "none")] = BASIC + ["custom-coordinates", "custom-tile-sum", "auto"]
    g[("nav1", "random")] = BASIC + ["custom-coordinates"]
    g[("nav1", "single")] = ["pick"]
    g[("nav3", "none")] = BASIC + ["custom-coordinates", "custom-aux", "custom-merge-all"]
    g[("nav3", "random")] = BASIC + ["custom-coordinates"]
    g[("one-frame", "none")] = BASIC + ["custom-frame-max", "custom-derived"]
    g[("one-frame", "single")] = ["pick"]
    g[("zero-frames", "none")] = BASIC + ["com-default", "com-ring-frac", "com-reg1"]
    for key in RAW:
        g[(key, "none")] = BASIC + ["custom-coordinates", "custom-tile-sum", "custom-frames"]
    g[("raw-sync-4", "random")] = BASIC
    g[("raw-sync+3", "single")] = ["pick", "custom-frames"]
    for key in MIB:
        g[(key, "none")] = ["sum", "sumsig", "com-default", "custom-frames"]
    g[("mib-multi3-hdr", "random")] = ["sum", "sumsig", "stddev", "custom-frames"]
    g[("mib-sync-3", "random")] = ["sum", "sumsig", "custom-frames"]
    g[("mib-nav-beyond", "random")] = ["sum", "sumsig", "custom-frames"]
    g[("raw-nav-beyond", "random")] = ["sum", "sumsig", "stddev", "custom-frames"]
    return g


GROUPS = _groups()
CASES = [
    (f"{ds}-{roi_kind}-{udf}", (ds, roi_kind), udf)
    for (ds, roi_kind), udfs in GROUPS.items()
    for udf in udfs
]


def group_file(group) -> str:
    return os.path.join(DATA, "udfs", f"{group[0]}__{group[1]}.npz")


def masks_file() -> str:
    return os.path.join(DATA, "masks.npz")
