"""The TOML descriptor of a raw_csr scan (see :mod:`ltdask.io.formats.raw_csr`): which three
files hold the CSR matrix, their dtypes, and the scan's shapes."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass

import numpy as np

from ltdask.exceptions import DataSetError
from ltdask.io.checks import check_dtype, is_regular_file

CSR_KEYS = (
    "indptr_file",
    "indptr_dtype",
    "indices_file",
    "indices_dtype",
    "data_file",
    "data_dtype",
)
#: descriptors larger than this are not TOML files worth parsing while guessing a format
TOML_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class CSRFiles:
    """The three files of a CSR scan and their dtypes (as stored)."""

    indptr: str
    indptr_dtype: np.dtype
    indices: str
    indices_dtype: np.dtype
    data: str
    data_dtype: np.dtype


def load_toml(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise DataSetError(f"{path!r} is not valid TOML: {e}") from None
    except UnicodeDecodeError:
        raise DataSetError(f"{path!r} is not a TOML text file") from None


def read_descriptor(path: str) -> tuple[dict, CSRFiles]:
    """``(params, files)`` of a raw_csr TOML descriptor; clear errors for what is missing."""
    conf = load_toml(path)
    params = conf.get("params")
    if not isinstance(params, dict):
        raise DataSetError(f"{path!r} has no [params] table; expected a raw_csr descriptor")
    filetype = params.get("filetype")
    if not isinstance(filetype, str) or filetype.lower() != "raw_csr":
        raise DataSetError(f"{path!r}: [params] filetype = {filetype!r}; expected 'raw_csr'")
    section = conf.get(filetype, conf.get("raw_csr"))
    if not isinstance(section, dict):
        raise DataSetError(
            f"{path!r} has no [raw_csr] table; it needs the keys {', '.join(CSR_KEYS)}"
        )
    missing = [k for k in CSR_KEYS if k not in section]
    if missing:
        raise DataSetError(
            f"{path!r}: [raw_csr] lacks {', '.join(missing)}; it needs {', '.join(CSR_KEYS)}"
        )
    base = os.path.dirname(os.path.abspath(path))
    dtypes = {}
    for part in ("indptr", "indices", "data"):
        value = section[f"{part}_dtype"]
        try:
            dt = np.dtype(value)
        except (TypeError, ValueError):
            raise DataSetError(f"{path!r}: {part}_dtype = {value!r} is not a numpy dtype") from None
        if part != "data" and dt.kind not in "iu":
            raise DataSetError(
                f"{path!r}: {part}_dtype = {value!r} ({dt}); expected an integer dtype"
            )
        dtypes[part] = dt
    dtypes["data"] = check_dtype(dtypes["data"], path)
    names = {}
    for part in ("indptr", "indices", "data"):
        name = section[f"{part}_file"]
        if not isinstance(name, str) or not name:
            raise DataSetError(f"{path!r}: {part}_file = {name!r} is not a file name")
        names[part] = os.path.join(base, name)
    files = CSRFiles(
        names["indptr"],
        dtypes["indptr"],
        names["indices"],
        dtypes["indices"],
        names["data"],
        dtypes["data"],
    )
    return params, files


def is_raw_csr(path: str) -> bool:
    """Whether `path` is a raw_csr descriptor (a small TOML file with ``filetype =
    "raw_csr"`` in its ``[params]``); False for anything but a regular file."""
    try:
        if not is_regular_file(path) or os.path.getsize(path) > TOML_MAX_BYTES:
            return False
        with open(path, "rb") as f:
            conf = tomllib.load(f)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    params = conf.get("params")
    return isinstance(params, dict) and str(params.get("filetype", "")).lower() == "raw_csr"
