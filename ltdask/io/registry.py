"""The file formats ltdask reads: the built-in ones, and plug-ins from other packages.

A format is one package (a folder) that declares a `Format` record: its name, how its files
are recognised (suffixes, magic bytes, a sniffing function), the function that opens them
and the keywords that function takes; its ``__all__`` names what ``ltdask.io`` exports of
it (see `ltdask.io.formats`). Everything that lists formats reads this registry:
:func:`ltdask.open`, the xarray engine, ``Context.load`` and ``ltdask info``.

Built-in formats are the lines of `BUILTIN`. Another package adds a format with an entry
point in the group ``ltdask.formats`` that names its record::

    [project.entry-points."ltdask.formats"]
    toy = "toy_detector.ltdask_format:FORMAT"

Records are loaded when a scan is first opened, not when ltdask is imported. A plug-in that
cannot be loaded is left out with a `FormatPluginWarning`; asking for it by name raises a
`FormatPluginError` that says why.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

from ltdask.exceptions import DataSetError, warn
from ltdask.io.calibration import CALIBRATION_KEYWORDS

if TYPE_CHECKING:
    from ltdask.io.dataset import DataSet

#: the entry-point group of format plug-ins
ENTRY_POINT_GROUP = "ltdask.formats"

#: the built-in formats, in the order ``ltdask.open`` tries them: name -> its record
BUILTIN: dict[str, str] = {
    "raw": "ltdask.io.formats.raw:FORMAT",
    "npy": "ltdask.io.formats.npy:FORMAT",
    "hdf5": "ltdask.io.formats.hdf5:FORMAT",
    "zarr": "ltdask.io.formats.zarr:FORMAT",
    "raw_csr": "ltdask.io.formats.raw_csr:FORMAT",
    "mib": "ltdask.io.formats.mib:FORMAT",
    "mrc": "ltdask.io.formats.mrc:FORMAT",
    "dm": "ltdask.io.formats.dm:FORMAT",
    "dectris": "ltdask.io.formats.dectris:FORMAT",
    "velox": "ltdask.io.formats.velox:FORMAT",
    "empad": "ltdask.io.formats.empad:FORMAT",
    "blo": "ltdask.io.formats.blo:FORMAT",
    "tvips": "ltdask.io.formats.tvips:FORMAT",
    "seq": "ltdask.io.formats.seq:FORMAT",
    "frms6": "ltdask.io.formats.frms6:FORMAT",
    "k2is": "ltdask.io.formats.k2is:FORMAT",
}


class FormatPluginError(DataSetError):
    """A format's record or opener cannot be loaded, or its opener returns something other
    than a dataset (a broken or incompatible plug-in).

    Examples
    --------
    >>> toy = Format("toy", "no_such_module_xyz:open_toy", "toy scans (.toy)")
    >>> try:
    ...     toy.open("scan.toy")
    ... except FormatPluginError as e:  # an ltdask.DataSetError
    ...     print(e)  # doctest: +ELLIPSIS
    the opener 'no_such_module_xyz:open_toy' of the format 'toy' cannot be loaded: ...
    >>> issubclass(FormatPluginError, DataSetError)
    True
    """


class FormatPluginWarning(RuntimeWarning):
    """A format plug-in cannot be loaded: scans are recognised and opened without it.

    Examples
    --------
    Where a broken plug-in must stop the program rather than be left out:

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", FormatPluginWarning)
    ...     refresh()  # read the entry points again
    ...     names = [f.name for f in formats()]
    >>> names[:3], broken_formats()  # the plug-ins left out: name -> why
    (['raw', 'npy', 'hdf5'], {})
    """


def _strings(value, what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    values = tuple(value)
    if not all(isinstance(v, str) for v in values):
        raise TypeError(f"Format: {what} must be strings, got {values!r}")
    return values


@dataclass(frozen=True)
class Format:
    """One file format: how ``ltdask.open`` recognises it and what opens it.

    Parameters
    ----------
    name
        ``format=`` of :func:`ltdask.open`, and the file type of ``Context.load``.
    opener
        The ``open_*`` function, ``opener(path, **keywords) -> DataSet``, or its import
        path ``"package.module:function"`` (imported when the format is first used).
    description
        One line for messages and docs: what the format is and how it is recognised.
    suffixes
        File name suffixes that mean this format (lower case, with the dot).
    magic
        Byte strings that a file of this format starts with.
    sniff
        ``sniff(path) -> bool``: looks into a regular file (a directory, with `directory`)
        that no format claimed by suffix or magic bytes; must be quick and must not raise.
    content
        ``content(path) -> bool``: recognises a regular file by its content before any
        suffix is looked at, for formats whose files carry another format's suffix (K2 IS
        sector files are ``.bin``, as raw files are); it overrides the name, so it must be
        strict (more than a few magic bytes), quick, and must not raise.
    directory
        The data is a directory (a store), never a regular file.
    claims
        ``claims(target) -> bool``: what the format takes before any file is examined
        (objects such as a ``zarr.Array``, URLs); must not raise.
    keywords
        The keywords the opener takes besides the path; None: those of its signature.
    required
        Keywords without which the data cannot be read (it has no header): a file that no
        format recognises is read as this format when they are all given.
    aliases
        Other names of the format (``Context.load("h5")``).
    keyword_aliases
        ``(given, taken)`` pairs: ``ltdask.open(path, given=x)`` calls the opener with
        ``taken=x``.
    engine_suffixes
        Suffixes that ``xarray.open_dataset`` gives to the ``ltdask`` engine without
        ``engine="ltdask"`` (only those no other xarray engine reads); `sniff` confirms.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> def open_toy(path, sig_dims=2):
    ...     return ltdask.from_array(np.load(path), sig_dims=sig_dims)
    >>> toy = Format("toy", open_toy, "toy scans (.toy)", suffixes=(".toy",))
    >>> toy.keyword_names()
    ('sig_dims',)
    """

    name: str
    opener: Callable[..., DataSet] | str
    description: str
    suffixes: tuple[str, ...] = ()
    magic: tuple[bytes, ...] = ()
    sniff: Callable[[str], bool] | None = None
    content: Callable[[str], bool] | None = None
    directory: bool = False
    claims: Callable[[Any], bool] | None = None
    keywords: tuple[str, ...] | None = None
    required: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    keyword_aliases: tuple[tuple[str, str], ...] = ()
    engine_suffixes: tuple[str, ...] = ()

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise TypeError(f"Format: name={self.name!r} must be an identifier")
        if not (callable(self.opener) or (isinstance(self.opener, str) and ":" in self.opener)):
            raise TypeError(
                f"Format {self.name!r}: opener={self.opener!r} must be a function or "
                "'module:function'"
            )
        fix = object.__setattr__  # normalising the fields of a frozen record
        for field in ("suffixes", "engine_suffixes"):
            values = tuple(s.lower() for s in _strings(getattr(self, field), field))
            if not all(s.startswith(".") for s in values):
                raise TypeError(f"Format {self.name!r}: {field}={values} must start with '.'")
            fix(self, field, values)
        for field in ("required", "aliases"):
            fix(self, field, _strings(getattr(self, field), field))
        if self.keywords is not None:
            fix(self, "keywords", _strings(self.keywords, "keywords"))
        magic = (self.magic,) if isinstance(self.magic, bytes) else tuple(self.magic)
        if not all(isinstance(m, bytes) and m for m in magic):
            raise TypeError(f"Format {self.name!r}: magic={magic!r} must be non-empty bytes")
        fix(self, "magic", magic)
        fix(self, "keyword_aliases", tuple((str(a), str(b)) for a, b in self.keyword_aliases))

    def load_opener(self) -> Callable[..., DataSet]:
        """The opener, imported if the record names it by its import path."""
        if callable(self.opener):
            return self.opener
        try:
            return EntryPoint(self.name, self.opener, ENTRY_POINT_GROUP).load()
        except Exception as e:  # whatever importing someone's module raises
            raise FormatPluginError(
                f"the opener {self.opener!r} of the format {self.name!r} cannot be loaded: "
                f"{type(e).__name__}: {e}; update or uninstall the package that provides it"
            ) from e

    def keyword_names(self) -> tuple[str, ...] | None:
        """The keywords the opener takes besides the path (None: any), less the calibration
        keywords every format takes through ``ltdask.open``."""
        if self.keywords is not None:
            return self.keywords
        params = list(inspect.signature(self.load_opener()).parameters.values())[1:]
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return None
        return tuple(
            p.name
            for p in params
            if p.kind is not inspect.Parameter.VAR_POSITIONAL and p.name not in CALIBRATION_KEYWORDS
        )

    def opener_name(self) -> str:
        """The opener's own name, under which ``ltdask`` and ``ltdask.io`` export it where it
        starts with ``open_`` (``open_mib``; a plug-in's too, once its record is loaded)."""
        if isinstance(self.opener, str):
            return self.opener.rpartition(":")[2].rpartition(".")[2]
        return getattr(self.opener, "__name__", "")

    def open(self, *args, **kwargs) -> DataSet:
        """Call the opener; what it returns must be a dataset."""
        from ltdask.io.dataset import DataSet

        opener = self.load_opener()
        ds = opener(*args, **kwargs)
        if not isinstance(ds, DataSet):
            name = self.opener if isinstance(self.opener, str) else _qualified(opener)
            shown = " ".join(repr(ds).split())  # (one line)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise FormatPluginError(
                f"the opener {name} of the format {self.name!r} returned "
                f"{type(ds).__name__} {shown}, not an ltdask DataSet; an opener must return "
                "one (ltdask.from_array makes one of an array); fix or update the package "
                "that provides it"
            )
        return ds


def _qualified(fn) -> str:
    """``module:name`` of a function, as a record names an opener by its import path."""
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    return f"{module}:{name}" if module and name else repr(fn)


# -- loading ----------------------------------------------------------------------------------
def _origin(entry: EntryPoint) -> str:
    dist = getattr(entry, "dist", None)
    where = f"the package {dist.name}" if dist is not None else "a plug-in"
    return f"{where} (entry point {entry.name} = {entry.value!r} in {entry.group})"


def _record(entry: EntryPoint) -> Format:
    try:
        record = entry.load()
    except Exception as e:  # whatever importing someone's module raises
        builtin = entry.name in BUILTIN and entry.value == BUILTIN[entry.name]
        origin = "ltdask itself" if builtin else _origin(entry)
        fix = "reinstall ltdask" if builtin else "update or uninstall that package"
        raise FormatPluginError(
            f"the record of the format {entry.name!r} from {origin} cannot be loaded: "
            f"{type(e).__name__}: {e}; {fix}"
        ) from e
    if not isinstance(record, Format):
        raise FormatPluginError(
            f"the format {entry.name!r} from {_origin(entry)} is not an ltdask.io.Format: "
            f"the entry point names {type(record).__name__} {record!r}"
        )
    if record.name != entry.name:
        raise FormatPluginError(
            f"the format {entry.name!r} from {_origin(entry)} is named {record.name!r} in its "
            "record; the entry point must have the format's name"
        )
    return record


@dataclass(frozen=True)
class _Registry:
    formats: dict[str, Format]
    #: alias -> name
    aliases: dict[str, str]
    #: name -> why it could not be loaded
    broken: dict[str, str]


@functools.cache
def _registry() -> _Registry:
    loaded: dict[str, Format] = {}
    broken: dict[str, str] = {}
    entries = [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in BUILTIN.items()]
    plugins: dict[str, EntryPoint] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name in BUILTIN:
            broken[f"{entry.name} ({entry.value})"] = (
                f"the format {entry.name!r} from {_origin(entry)} is ignored: a built-in "
                "format has that name"
            )
        elif entry.name in plugins and plugins[entry.name].value != entry.value:
            broken[entry.name] = (
                f"two plug-ins name the format {entry.name!r}: {_origin(plugins[entry.name])} "
                f"and {_origin(entry)}; uninstall one"
            )
        else:
            plugins[entry.name] = entry
    entries += [plugins[name] for name in sorted(plugins) if name not in broken]
    for entry in entries:
        try:
            loaded[entry.name] = _record(entry)
        except FormatPluginError as e:
            broken[entry.name] = str(e)
    aliases: dict[str, str] = {}
    for record in loaded.values():
        for alias in record.aliases:
            if alias not in loaded:
                aliases.setdefault(alias, record.name)
    for why in broken.values():
        warn(why, FormatPluginWarning)
    return _Registry(loaded, aliases, broken)


def refresh() -> None:
    """Forget the loaded records: the next lookup reads the entry points again (after a
    plug-in was installed in a running session)."""
    _registry.cache_clear()


# -- lookups ------------------------------------------------------------------------------------
def formats() -> tuple[Format, ...]:
    """Every format that could be loaded: the built-in ones in `BUILTIN` order, then the
    plug-ins by name.

    Examples
    --------
    >>> [f.name for f in formats()][:6]
    ['raw', 'npy', 'hdf5', 'zarr', 'raw_csr', 'mib']
    """
    return tuple(_registry().formats.values())


def find_format(name: str) -> Format | None:
    """The format called `name` (or an alias of it), or None if there is none.

    Raises
    ------
    FormatPluginError
        The format exists but cannot be loaded.
    """
    registry = _registry()
    name = registry.aliases.get(name, name)
    if name in registry.broken:
        raise FormatPluginError(registry.broken[name])
    return registry.formats.get(name)


def get_format(name: str, where: str | None = None) -> Format:
    """The format called `name` (or an alias); errors say which are known.

    Raises
    ------
    ltdask.DataSetError
        No format has that name.
    FormatPluginError
        The format exists but cannot be loaded.

    Examples
    --------
    >>> fmt = get_format("h5")
    >>> fmt.name, fmt.suffixes[:2], fmt.keyword_names()[:2]
    ('hdf5', ('.h5', '.hdf5'), ('key', 'sig_dims'))
    """
    record = find_format(name) if isinstance(name, str) else None
    if record is None:
        prefix = f"{where!r}: " if where is not None else ""
        raise DataSetError(
            f"{prefix}format={name!r} is not known; supported: {', '.join(format_names())}"
        )
    return record


def format_names() -> tuple[str, ...]:
    """The names of the formats that could be loaded."""
    return tuple(_registry().formats)


def opener_named(name: str) -> Callable[..., DataSet]:
    """The opener of the format whose opener is called `name` (``ltdask.open_toy`` of a
    plug-in; the built-in ones are exported without loading the registry).

    Raises
    ------
    AttributeError
        No format's opener has that name.
    """
    if name.startswith("open_"):
        for record in formats():
            if record.opener_name() == name:
                return record.load_opener()
    raise AttributeError(f"no format's opener is called {name!r}")


def broken_formats() -> dict[str, str]:
    """Formats that could not be loaded: name -> why."""
    return dict(_registry().broken)


def supported_formats(records: Sequence[Format] | None = None) -> str:
    """``"raw: ...; npy: ..."``: each format's name and description, for messages.

    Examples
    --------
    >>> supported_formats([get_format("npy"), get_format("zarr")])
    'npy: .npy; zarr: .zarr directories, zarr.json/.zarray (path= or key= names the array)'
    >>> supported_formats().startswith("raw: .raw/.bin/.dat, with nav_shape=")
    True
    """
    records = formats() if records is None else records
    return "; ".join(f"{f.name}: {f.description}" for f in records)
