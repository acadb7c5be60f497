"""The analyses ``ltdask run`` offers: a shipped UDF each, with its parameters read from the
UDF's signature and docstring (name, type, default, description) and parsed from
``-p NAME=VALUE`` into that type."""

from __future__ import annotations

import ast
import difflib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ltdask.cli._errors import UserError

#: the value a parameter without a default must be given
REQUIRED = inspect.Parameter.empty
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


@dataclass(frozen=True)
class Parameter:
    """One ``-p NAME=VALUE`` of an analysis."""

    name: str
    kind: str  #: float, int, bool, dtype, or value (a Python literal, else the text)
    default: Any
    help: str = ""
    default_text: str = ""
    #: whether ``none`` is a value (optional numbers)
    nullable: bool = False

    def parse(self, text: str, analysis: str) -> Any:
        """`text` as this parameter's type, or a `UserError` naming ``-p NAME``."""
        value = text.strip()
        try:
            if self.kind == "bool":
                if value.lower() in _TRUE + _FALSE:
                    return value.lower() in _TRUE
                raise ValueError
            if self.kind == "dtype":
                import numpy as np

                return np.dtype(value).name
            if self.kind in ("int", "float"):
                if value.lower() == "none" and (self.nullable or self.default is None):
                    return None
                number = ast.literal_eval(value) if value.lower() != "inf" else float("inf")
                if self.kind == "int" and (isinstance(number, bool) or number != int(number)):
                    raise ValueError
                if not isinstance(number, int | float) or isinstance(number, bool):
                    raise ValueError
                return int(number) if self.kind == "int" else float(number)
        except (ValueError, TypeError, SyntaxError, OverflowError):
            raise UserError(
                f"-p {self.name}={text}: {analysis}'s {self.name} is {self.type_text}"
            ) from None
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value

    @property
    def type_text(self) -> str:
        return {
            "bool": "true or false",
            "dtype": "a numpy dtype such as float32 or float64",
            "int": "an integer",
            "float": "a number",
        }.get(self.kind, "a Python literal (number, tuple, string)")

    def describe(self) -> tuple[str, str]:
        """``NAME=TYPE`` and what it is, with its default, for ``--help``."""
        if self.default is REQUIRED:
            default = " (required)"
        elif "default" in self.help:
            default = ""
        else:
            default = f" (default: {self.default_text or _show(self.default)})"
        return f"{self.name}={self.kind.upper()}", f"{self.help}{default}".strip()


def _show(value) -> str:
    return "none" if value is None else str(value)


@dataclass(frozen=True)
class Analysis:
    """An analysis ``ltdask run NAME`` runs: a UDF built from the parsed parameters and the
    scan's frame shape."""

    name: str
    summary: str
    parameters: tuple[Parameter, ...]
    build: Callable[[dict, tuple], Any]

    def parse(self, pairs) -> dict:
        """``-p NAME=VALUE`` texts as typed values; unknown names get the closest as a hint."""
        known = {p.name: p for p in self.parameters}
        values: dict[str, Any] = {}
        for pair in pairs:
            if "=" not in pair:
                raise UserError(f"-p {pair!r}: expected NAME=VALUE, such as -p r=20")
            name, text = (part.strip() for part in pair.split("=", 1))
            if name not in known:
                raise UserError(self._unknown(name))
            values[name] = known[name].parse(text, self.name)
        missing = [
            p.name for p in self.parameters if p.default is REQUIRED and p.name not in values
        ]
        if missing:
            raise UserError(
                f"{self.name} needs -p {'=... -p '.join(missing)}=... (see ltdask run "
                f"{self.name} --help)"
            )
        return values

    def _unknown(self, name: str) -> str:
        names = [p.name for p in self.parameters]
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        takes = f"it takes {', '.join(names)}" if names else "it takes no parameters"
        return f"-p {name}: {self.name} has no parameter {name!r}{hint} ({takes})"


def _documented(func) -> dict[str, tuple[str, str]]:
    """``name -> (type text, first sentence)`` from a numpydoc Parameters section."""
    doc = inspect.getdoc(func) or ""
    if "Parameters\n----------\n" not in doc:
        return {}
    section = doc.split("Parameters\n----------\n", 1)[1].split("\n\n", 1)[0]
    found: dict[str, list[str]] = {}
    for line in section.splitlines():
        if line and not line.startswith(" "):
            name, _, type_text = line.partition(" : ")
            for each in name.split(", "):  # "nav_shape, sig_shape"
                found[each.strip()] = [type_text.strip(), ""]
            last = [n.strip() for n in name.split(", ")]
        elif found:
            for each in last:
                found[each][1] = f"{found[each][1]} {line.strip()}".strip()
    return {
        k: (t, re.split(r"\.\s+(?=[A-Z])", text.replace("``", ""))[0].rstrip("."))
        for k, (t, text) in found.items()
    }


def _kind(name: str, type_text: str, default) -> str:
    words = f"{type_text} {name}".lower()
    if "dtype" in words:
        return "dtype"
    for kind, python in (("bool", bool), ("int", int), ("float", float)):
        if isinstance(default, python) or re.match(rf"{kind}\b", type_text):
            return kind
    return "value"


def parameters_of(func, skip=(), defaults: dict | None = None, doc=None) -> tuple[Parameter, ...]:
    """The parameters of `func` (a UDF's ``__init__`` or factory), typed from the docstring
    of `doc` (default: `func`'s) and their defaults; `defaults` describes defaults that
    depend on the scan."""
    documented = _documented(doc or func)
    params = []
    for p in inspect.signature(func).parameters.values():
        if p.name in ("self", "cls", *skip) or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        type_text, text = documented.get(p.name, ("", ""))
        params.append(
            Parameter(
                p.name,
                _kind(p.name, type_text, p.default),
                p.default,
                text,
                (defaults or {}).get(p.name, ""),
                "None" in type_text or "optional" in type_text,
            )
        )
    return tuple(params)


def summary_of(cls) -> str:
    text = (inspect.getdoc(cls) or cls.__name__).split("\n\n", 1)[0]
    return text.replace("\n", " ").replace("``", "")


def find(name: str, analyses: dict[str, Analysis]) -> Analysis:
    if name in analyses:
        return analyses[name]
    close = difflib.get_close_matches(name, list(analyses), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise UserError(
        f"no analysis {name!r}{hint} (ltdask run --help lists them: {', '.join(analyses)})"
    )


#: the analyses whose geometry ``ltdask run`` takes from the direct beam (`ltdask.find_beam`)
#: where ``-p`` does not give it
BEAM_GEOMETRY = {
    "disk": ("cy", "cx", "r"),
    "ring": ("cy", "cx", "r", "ri"),
    "com": ("cy", "cx", "r"),
}


def beam_geometry(name: str, values: dict, ds, roi, corrections) -> str | None:
    """Fill the geometry of analysis `name` that `values` (the ``-p`` given) lacks from the
    direct beam: its centre; ``r`` (a disk, CoM) and ``ri`` (a ring) reach past the beam's
    radius by how far it wanders; a ring's ``r`` is the largest that fits the frame. Returns
    what to tell the user (None: nothing was looked for); where no beam stands out, the
    analysis keeps its own defaults (the frame's centre) and the line says why."""
    from ltdask.beam import find_beam
    from ltdask.exceptions import DataSetError

    wanted = [k for k in BEAM_GEOMETRY.get(name, ()) if k not in values]
    if not wanted:
        return None
    try:
        beam = find_beam(ds, roi=roi, corrections=corrections)
    except DataSetError as e:
        return f"no direct beam found ({e}); {', '.join(wanted)}: {name}'s defaults"
    cy, cx = values.get("cy", beam.cy), values.get("cx", beam.cx)
    reach = beam.r + beam.wander
    sy, sx = ds.sig_shape[-2], ds.sig_shape[-1]
    inside = min(cy, cx, sy - 1 - cy, sx - 1 - cx)
    found = {"cy": beam.cy, "cx": beam.cx, "r": reach, "ri": reach}
    if name == "ring":
        found["r"] = max(inside, values.get("ri", reach) + 1)
    for k in wanted:
        values[k] = round(float(found[k]), 2)
    return (
        f"direct beam (ltdask.find_beam, {beam.frames} frames): cy={beam.cy:.2f} "
        f"cx={beam.cx:.2f} r={beam.r:.2f} px, wandering {beam.wander:.2f} px; "
        + " ".join(f"-p {k}={values[k]}" for k in wanted)
        + " (give -p to choose)"
    )


# -- the catalogue -----------------------------------------------------------------------------
def _geometry(ring: bool) -> tuple[Parameter, ...]:
    """The disk (ring) ``disk`` and ``ring`` sum each frame over."""
    params = [
        Parameter("cy", "float", None, "row of the centre", "the direct beam's"),
        Parameter("cx", "float", None, "column of the centre", "the direct beam's"),
        Parameter(
            "r",
            "float",
            None,
            "outer radius",
            "the frame's nearest edge" if ring else "the direct beam's, and its wander",
        ),
    ]
    if ring:
        params.append(
            Parameter("ri", "float", None, "inner radius", "the direct beam's, and its wander")
        )
    return tuple(params)


def _masks(ring: bool):
    def build(values: dict, sig_shape: tuple):
        from ltdask import masks
        from ltdask.udf import ApplyMasksUDF

        sy, sx = sig_shape[-2], sig_shape[-1]
        popped = {k: values.pop(k, None) for k in ("cy", "cx", "r", "ri")}
        given = {k: v for k, v in popped.items() if v is not None}
        cy = given.get("cy", sy / 2)
        cx = given.get("cx", sx / 2)
        r = given.get("r", min(sy, sx) / 4)
        geometry = {"cy": cy, "cx": cx, "r": r}
        if ring:
            ri = geometry["ri"] = given.get("ri", r / 2)

            def mask():
                return masks.ring(cx, cy, sx, sy, r, ri)
        else:

            def mask():
                return masks.circular(cx, cy, sx, sy, r)

        _refuse_empty(mask, "ring" if ring else "disk", geometry, given, (sy, sx))
        return ApplyMasksUDF([mask], **values)

    return build


def _refuse_empty(mask, name: str, geometry: dict, given: dict, frame: tuple) -> None:
    """A `UserError` in ``-p`` terms for a disk or ring without a pixel in the frame, which
    gives 0 at every position (`ltdask.EmptyMaskWarning` from the mask factory). Other
    mistakes in the geometry are left to the UDF, which reports them when it is run."""
    import warnings

    from ltdask.exceptions import EmptyMaskWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", EmptyMaskWarning)
        try:
            mask()
        except EmptyMaskWarning:
            pass
        except ValueError:
            return
        else:
            return
    sy, sx = frame
    options = " ".join(
        f"-p {k}={_show(v)}" + ("" if k in given else " (default)") for k, v in geometry.items()
    )
    raise UserError(
        f"{options}: the {name} has no pixel in the scan's {sy} x {sx} frames (-p cy counts rows "
        f"0..{sy - 1}, -p cx columns 0..{sx - 1}): every result would be 0; move -p cy and -p cx "
        "to within -p r of the frame, or make -p r larger"
    )


def _catalogue() -> dict[str, Analysis]:
    from ltdask import udf

    def plain(cls, **kw):
        return Analysis(
            kw.pop("name"),
            kw.pop("summary", None) or summary_of(cls),
            parameters_of(cls.__init__, doc=cls, **kw),
            lambda values, sig_shape: cls(**values),
        )

    mask_options = parameters_of(
        udf.ApplyMasksUDF.__init__,
        skip=("mask_factories", "use_torch", "mask_count", "backends", "shifts"),
        doc=udf.ApplyMasksUDF,
    )
    analyses = [
        plain(udf.SumUDF, name="sum"),
        plain(udf.SumSigUDF, name="sumsig"),
        plain(udf.StdDevUDF, name="stddev", skip=("use_numba",)),
        Analysis(
            "com",
            summary_of(udf.CoMUDF),
            parameters_of(udf.CoMUDF.with_params),
            lambda values, sig_shape: udf.CoMUDF.with_params(**values),
        ),
        plain(udf.PickUDF, name="pick"),
        Analysis(
            "disk",
            "Virtual detector: the sum of each frame inside a disk (ApplyMasksUDF).",
            _geometry(False) + mask_options,
            _masks(ring=False),
        ),
        Analysis(
            "ring",
            "Virtual annular detector: the sum of each frame inside a ring (ApplyMasksUDF).",
            _geometry(True) + mask_options,
            _masks(ring=True),
        ),
        plain(udf.LogsumUDF, name="logsum"),
        plain(udf.FEMUDF, name="fem"),
        plain(udf.CrystallinityUDF, name="crystallinity"),
    ]
    return {a.name: a for a in analyses}


#: ``ltdask run``'s analyses by name, in the order its help lists them
ANALYSES = _catalogue()
