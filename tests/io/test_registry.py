"""The format registry: built-in records, and plug-ins through the real entry-point machinery
(a package on ``sys.path`` with a ``*.dist-info`` that declares ``ltdask.formats``)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.formatfiles import FORMATS, TOO_LARGE_FOR_TABLE

import ltdask
from ltdask import DataSetError
from ltdask.io import registry
from ltdask.io.calibration import CALIBRATION_KEYWORDS
from ltdask.io.registry import BUILTIN, Format, FormatPluginError, get_format


def test_builtin_records_load_in_table_order():
    assert registry.format_names()[: len(BUILTIN)] == tuple(BUILTIN)
    assert registry.broken_formats() == {}
    for name in BUILTIN:
        record = get_format(name)
        assert isinstance(record, Format) and record.name == name
        assert record.description and "\n" not in record.description


@pytest.mark.parametrize("name", list(BUILTIN))
def test_declared_keywords_are_the_openers(name):
    record = get_format(name)
    params = list(inspect.signature(record.load_opener()).parameters)[1:]
    # every opener takes the calibration keywords, which ltdask.open handles for all formats
    assert params[-2:] == list(CALIBRATION_KEYWORDS)
    params = params[:-2]
    assert record.keywords == tuple(params)
    for given, taken in record.keyword_aliases:
        assert taken in params and given not in params
    assert set(record.required) <= set(params)


@pytest.mark.parametrize("name", list(BUILTIN))
def test_every_format_has_a_conformance_row(name):
    """Adding a format is its folder, its line in BUILTIN and its row in the table of
    ``tests/helpers/formatfiles.py`` that ``test_conformance.py`` runs."""
    opener = get_format(name).load_opener()
    if name in TOO_LARGE_FOR_TABLE:  # its own module runs the table's checks on fewer frames
        assert (Path(__file__).parents[1] / TOO_LARGE_FOR_TABLE[name]).is_file()
        return
    assert any(row.opener is opener for row in FORMATS), f"no row of FORMATS opens {name}"


def _tool(name: str):
    path = Path(__file__).parents[2] / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_public_names_come_from_the_format_folders():
    """A format is its folder and its line in BUILTIN: ``ltdask.io`` exports each format
    package's ``__all__`` and ``ltdask`` its opener, from the lists that
    ``tools/write_format_names.py`` writes from the registry (and that must be up to date)."""
    assert _tool("write_format_names").main(["--check"]) == 0
    exported_by_formats = set()
    for name, where in BUILTIN.items():
        package = importlib.import_module(where.partition(":")[0])
        assert package.__name__ == f"ltdask.io.formats.{name}"  # the format's own folder
        assert package.FORMAT is get_format(name)
        for export in set(package.__all__) - {"FORMAT"}:
            assert export in ltdask.io.__all__, export
            assert getattr(ltdask.io, export) is getattr(package, export), export
            exported_by_formats.add(export)
        opener = get_format(name).load_opener()
        assert opener.__name__ in ltdask.__all__ and opener.__name__ in package.__all__
        assert getattr(ltdask, opener.__name__) is opener
    # and nothing else of a format: the rest of the lists are the package's own names
    openers = {n for n in ltdask.__all__ if n.startswith("open_") and n != "open_dataset"}
    assert openers <= exported_by_formats
    with pytest.raises(AttributeError, match="module 'ltdask' has no attribute 'open_tiff'"):
        ltdask.open_tiff  # noqa: B018


def test_aliases_and_unknown_names(tmp_path):
    assert get_format("h5") is get_format("hdf5")
    assert registry.find_format("tiff") is None
    with pytest.raises(DataSetError, match=r"format='tiff' is not known; supported: raw, npy"):
        get_format("tiff")
    with pytest.raises(DataSetError, match=r"Context.load: unknown .* 'tiff'; expected one of raw"):
        ltdask.compat.Context.make_with("inline").load("tiff", tmp_path / "x")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        pytest.param(dict(name="a b"), r"name='a b' must be an identifier", id="name"),
        pytest.param(dict(opener="module.open"), r"must be a function or 'module:function'",
                     id="opener"),
        pytest.param(dict(suffixes=("toy",)), r"suffixes=\('toy',\) must start with '\.'",
                     id="suffix"),
        pytest.param(dict(magic=("TOY",)), r"magic=\('TOY',\) must be non-empty bytes",
                     id="magic"),
        pytest.param(dict(keywords=(1,)), r"keywords must be strings", id="keywords"),
    ],
)  # fmt: skip
def test_record_is_checked(kwargs, message):
    fields = dict(name="toy", opener="toy:open_toy", description="toy scans") | kwargs
    with pytest.raises(TypeError, match=message):
        Format(**fields)


def test_opener_named_by_import_path():
    toy = Format("toy", "ltdask.io.formats.npy:open_npy", "npy by another name")
    assert toy.load_opener() is ltdask.open_npy
    assert toy.keyword_names() == ("sig_dims", "sync_offset", "dims", "nav_shape", "sig_shape")
    missing = Format("toy", "no_such_module_xyz:open_toy", "toy scans")
    message = (
        r"the opener 'no_such_module_xyz:open_toy' of the format 'toy' cannot be loaded: "
        r"ModuleNotFoundError: .*; update or uninstall the package that provides it"
    )
    with pytest.raises(FormatPluginError, match=message):
        missing.open("scan.toy")


def test_record_fields_are_normalised():
    toy = Format("toy", "toy:open_toy", "toy scans", suffixes=[".TOY"], magic=b"TOY", aliases="t")
    assert toy.suffixes == (".toy",) and toy.magic == (b"TOY",) and toy.aliases == ("t",)
    assert toy.keywords is None  # the opener's signature, when it is imported


# -- plug-ins, through importlib.metadata's entry points, in a fresh process -----------------------
TOY_PACKAGE = {
    "toyfmt/__init__.py": '''
        """A toy detector format: b"TOY1", a 2-byte header length, a JSON header, frames."""
        from ltdask.io import Format

        FORMAT = Format(
            name="toy",
            opener="toyfmt.reader:open_toy",  # imported when first used
            description=".toy (a toy detector)",
            suffixes=(".toy",),
            magic=(b"TOY1",),
            keywords=("sig_dims", "sync_offset"),
            engine_suffixes=(".toy",),
        )
    ''',
    "toyfmt/reader.py": '''
        import json

        import ltdask


        def write_toy(path, data):
            header = json.dumps({"shape": data.shape, "dtype": data.dtype.str}).encode()
            with open(path, "wb") as f:
                f.write(b"TOY1" + len(header).to_bytes(2, "little") + header + data.tobytes())


        def open_toy(path, sig_dims=2, sync_offset=0):
            """A raw scan behind a header: the shared raw read path does the reading."""
            with open(path, "rb") as f:
                head = f.read(6)
                header = json.loads(f.read(int.from_bytes(head[4:], "little")))
            shape = header["shape"]
            return ltdask.open_raw(
                path,
                nav_shape=shape[:-sig_dims],
                sig_shape=shape[-sig_dims:],
                dtype=header["dtype"],
                file_header_bytes=6 + len(json.dumps(header).encode()),
                sync_offset=sync_offset,
            )
    ''',
    "toyfmt-0.1.dist-info/METADATA": """
        Metadata-Version: 2.1
        Name: toyfmt
        Version: 0.1
    """,
    "toyfmt-0.1.dist-info/entry_points.txt": """
        [ltdask.formats]
        toy = toyfmt:FORMAT
    """,
}

BROKEN_PACKAGES = {
    "brokenfmt.py": """
        raise RuntimeError("this plug-in is broken")
    """,
    "brokenfmt-0.1.dist-info/METADATA": """
        Metadata-Version: 2.1
        Name: brokenfmt
        Version: 0.1
    """,
    "brokenfmt-0.1.dist-info/entry_points.txt": """
        [ltdask.formats]
        broken = brokenfmt:FORMAT
    """,
    "oddfmt.py": """
        from ltdask.io import Format

        NOT_A_FORMAT = {"name": "odd"}
        MISNAMED = Format("other", "oddfmt:nothing", "misnamed")
    """,
    "oddfmt-0.1.dist-info/METADATA": """
        Metadata-Version: 2.1
        Name: oddfmt
        Version: 0.1
    """,
    "oddfmt-0.1.dist-info/entry_points.txt": """
        [ltdask.formats]
        odd = oddfmt:NOT_A_FORMAT
        misnamed = oddfmt:MISNAMED
        npy = oddfmt:MISNAMED
    """,
}


def _install(folder, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())


def _run(folder, script: str) -> str:
    """Run `script` in a fresh interpreter with `folder` first on ``sys.path``."""
    prelude = f"import sys\nsys.path.insert(0, {str(folder)!r})\n"
    proc = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_plugin_format_through_entry_points(tmp_path):
    site = tmp_path / "site"
    _install(site, TOY_PACKAGE)
    out = _run(
        site,
        f"""
        import warnings
        warnings.simplefilter("error")  # a plug-in that loads raises no warning

        import numpy as np
        import xarray as xr

        import ltdask
        from ltdask.compat import Context
        from toyfmt.reader import write_toy

        data = np.arange(3 * 4 * 5 * 6, dtype="<u2").reshape(3, 4, 5, 6)
        path = {str(tmp_path / "scan.toy")!r}
        write_toy(path, data)
        bare = {str(tmp_path / "scan-without-suffix")!r}
        write_toy(bare, data)

        assert "toy" in ltdask.io.registry.format_names()
        assert ltdask.io.detect_format(path) == "toy" and ltdask.io.detect_format(bare) == "toy"
        for target in (path, bare):
            ds = ltdask.open(target)
            np.testing.assert_array_equal(ds.to_dask().compute(), data)
        ds = ltdask.open(path, format="toy", sig_dims=1)
        assert ds.sig_shape == (6,)
        try:
            ltdask.open(path, key="x")
        except TypeError as e:
            assert "toy data does not take 'key'; open_toy takes sig_dims, sync_offset" in str(e)
        else:
            raise AssertionError("unknown keyword accepted")

        xa = xr.open_dataset(path, engine="ltdask")["data"]
        np.testing.assert_array_equal(xa.values, data)
        shifted = xr.open_dataset(path, engine="ltdask", sync_offset=1)["data"]
        np.testing.assert_array_equal(shifted.values.reshape(12, 5, 6)[:-1],
                                      data.reshape(12, 5, 6)[1:])
        np.testing.assert_array_equal(xr.open_dataarray(path).values, data)  # no engine=

        ctx = Context.make_with("inline")
        loaded = ctx.load("toy", path=path)
        np.testing.assert_array_equal(loaded.to_dask().compute(), data)
        sums = ctx.run_udf(dataset=loaded, udf=ltdask.udf.SumUDF())["intensity"].data
        np.testing.assert_allclose(sums, data.sum(axis=(0, 1)))
        print("toy ok")
        """,
    )
    assert "toy ok" in out


def test_broken_plugins_are_left_out_and_say_why(tmp_path):
    site = tmp_path / "site"
    _install(site, BROKEN_PACKAGES)
    out = _run(
        site,
        f"""
        import warnings

        import numpy as np
        import ltdask
        from ltdask.compat import Context
        from ltdask.io.registry import FormatPluginError, FormatPluginWarning

        path = {str(tmp_path / "scan.npy")!r}
        np.save(path, np.ones((2, 3, 4, 5), np.float32))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ds = ltdask.open(path)  # the built-in formats work on
        assert ds.shape == (2, 3, 4, 5)
        messages = [str(w.message) for w in caught if w.category is FormatPluginWarning]
        assert len(messages) == 4, messages
        for word in ("broken", "odd", "misnamed", "npy"):
            assert any(repr(word) in m for m in messages), (word, messages)

        def error(run):
            try:
                run()
            except FormatPluginError as e:
                return str(e)
            raise AssertionError("no FormatPluginError")

        broken = error(lambda: ltdask.open(path, format="broken"))
        for part in ("the record of the format 'broken' from the package brokenfmt",
                     "broken = 'brokenfmt:FORMAT' in ltdask.formats",
                     "RuntimeError: this plug-in is broken",
                     "update or uninstall that package"):
            assert part in broken, (part, broken)
        assert broken == error(lambda: Context.make_with("inline").load("broken", path))
        odd = error(lambda: ltdask.open(path, format="odd"))
        assert "is not an ltdask.io.Format: the entry point names dict {{'name'" in odd, odd
        misnamed = error(lambda: ltdask.io.registry.get_format("misnamed"))
        assert "is named 'other' in its record; the entry point must have" in misnamed
        assert "format 'npy' from the package oddfmt (entry point npy = 'oddfmt:MISNAMED' in " \
            "ltdask.formats) is ignored: a built-in format has that name" in " ".join(messages)
        assert ltdask.io.registry.get_format("npy").opener is ltdask.open_npy
        print("broken ok")
        """,
    )
    assert "broken ok" in out
