"""``import libertem`` resolved to ltdask: an opt-in alias, so that packages and scripts
written for LiberTEM run on ltdask without edits.

Three ways to turn it on (each refuses, with `AliasError`, where the real ``libertem`` is
importable):

* ``ltdask.compat.alias_libertem()`` in Python, before the first ``import libertem``;
* the environment variable ``LTDASK_ALIAS_LIBERTEM=1``, honoured by ``import ltdask`` (put
  ``import ltdask`` in a ``conftest.py`` or ``sitecustomize.py`` for code that never
  imports ltdask);
* ``python -m ltdask.compat.alias script.py [args]`` (or ``-m module [args]``) for a
  script one cannot edit.

`LIBERTEM_MODULES` says which ltdask names each LiberTEM module gives. Each alias module
(an `AliasModule`) finds its names when they are first asked for; a LiberTEM name or module
that ltdask has no counterpart for raises `AttributeError` / `NotInLtdaskError` (an
``ImportError``) saying so, never a stand-in.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from typing import Any

from ltdask.exceptions import LtdaskError

__all__ = [
    "ENVIRONMENT_VARIABLE",
    "LIBERTEM_MODULES",
    "REMOVED_MODULES",
    "AliasError",
    "AliasModule",
    "NotInLtdaskError",
    "alias_active",
    "alias_libertem",
    "alias_requested",
    "worker_settings",
]

#: the environment variable that turns the alias on at ``import ltdask``
ENVIRONMENT_VARIABLE = "LTDASK_ALIAS_LIBERTEM"

_DOCS = "see 'Running LiberTEM packages unchanged' in ltdask's docs/coming-from-libertem.md"

#: LiberTEM module -> where its names come from: ``"ltdask.module"`` (its public names:
#: ``__all__``, else the names it defines) or ``"Name=ltdask.module:attribute"``
LIBERTEM_MODULES: dict[str, tuple[str, ...]] = {
    "libertem": (),
    "libertem.api": ("ltdask.compat",),
    "libertem.udf": (
        "MaskContainer=ltdask.masks.container:MaskContainer",
        "UDFRunCancelled=ltdask.compat.exceptions:UDFRunCancelled",
        "ltdask.udf",
    ),
    "libertem.udf.base": (
        "ltdask.udf.base",
        "ltdask.udf",
        "UDFResults=ltdask.compat.results:UDFResults",
        "NoOpUDF=ltdask.udf.builtin.noop:NoOpUDF",
    ),
    "libertem.udf.sum": ("SumUDF=ltdask.udf:SumUDF",),
    "libertem.udf.sumsigudf": ("SumSigUDF=ltdask.udf:SumSigUDF",),
    "libertem.udf.stddev": ("ltdask.udf.builtin.stddev",),
    "libertem.udf.masks": ("ApplyMasksUDF=ltdask.udf:ApplyMasksUDF",),
    "libertem.udf.com": ("ltdask.udf.builtin.com", "ltdask.udf.builtin.com_guess"),
    "libertem.udf.raw": ("PickUDF=ltdask.udf:PickUDF",),
    "libertem.udf.auto": ("AutoUDF=ltdask.udf:AutoUDF",),
    "libertem.udf.logsum": ("ltdask.udf.builtin.logsum",),
    "libertem.udf.FEM": ("ltdask.udf.builtin.fem",),
    "libertem.udf.crystallinity": ("ltdask.udf.builtin.crystallinity",),
    "libertem.common": ("ltdask.common",),
    "libertem.common.slice": ("Slice=ltdask.common:Slice",),
    "libertem.common.shape": ("Shape=ltdask.common:Shape",),
    "libertem.common.container": ("ltdask.masks.container",),
    "libertem.common.exceptions": (
        "ExecutorSpecException=ltdask.exceptions:ExecutorSpecException",
        "UDFException=ltdask.exceptions:UDFError",
        "UDFRunCancelled=ltdask.compat.exceptions:UDFRunCancelled",
    ),
    "libertem.common.executor": ("JobCancelledError=ltdask.compat.exceptions:JobCancelledError",),
    "libertem.warnings": ("UseDiscouragedWarning=ltdask.exceptions:UseDiscouragedWarning",),
    "libertem.exceptions": (
        "ExecutorSpecException=ltdask.exceptions:ExecutorSpecException",
        "UDFRunCancelled=ltdask.compat.exceptions:UDFRunCancelled",
    ),
    "libertem.common.buffers": ("ltdask.compat.buffers",),
    "libertem.common.math": ("ltdask.compat.math",),
    "libertem.common.udf": ("UDFMethod=ltdask.udf.base:UDFMethod",),
    "libertem.common.sparse": (
        "is_sparse=ltdask.masks:is_sparse",
        "to_dense=ltdask.masks:to_dense",
        "to_sparse=ltdask.masks:to_sparse",
    ),
    "libertem.masks": ("ltdask.masks", "_make_circular_mask=ltdask.masks:circular"),
    "libertem.corrections": ("CorrectionSet=ltdask.corrections:CorrectionSet",),
    "libertem.corrections.corrset": ("CorrectionSet=ltdask.corrections:CorrectionSet",),
    "libertem.corrections.detector": ("ltdask.compat.detector",),
    "libertem.io": (),
    "libertem.io.corrections": ("CorrectionSet=ltdask.corrections:CorrectionSet",),
    "libertem.io.corrections.corrset": ("CorrectionSet=ltdask.corrections:CorrectionSet",),
    "libertem.io.corrections.detector": ("ltdask.compat.detector",),
    "libertem.io.dataset": (),
    "libertem.io.dataset.base": (
        "DataSet=ltdask.io:DataSet",
        "TilingScheme=ltdask.io:TilingScheme",
        "Negotiator=ltdask.io:Negotiator",
        "ltdask.compat.io_backends",
        "DataTile=ltdask.compat.tiles:DataTile",
    ),
    "libertem.io.dataset.memory": ("MemoryDataSet=ltdask.compat.datasets:MemoryDataSet",),
    "libertem.utils": (),
    "libertem.utils.generate": ("ltdask.compat.generate",),
    "libertem.utils.devices": (
        "detect=ltdask.compat.devices:detect",
        "has_cupy=ltdask.compat.devices:has_cupy",
    ),
    "libertem.common.backend": (
        "get_use_cpu=ltdask.compat.devices:get_use_cpu",
        "get_use_cuda=ltdask.compat.devices:get_use_cuda",
        "set_use_cpu=ltdask.compat.devices:set_use_cpu",
        "set_use_cuda=ltdask.compat.devices:set_use_cuda",
        "get_device_class=ltdask.compat.devices:get_device_class",
    ),
    "libertem.executor": (),
    "libertem.executor.base": ("JobExecutor=ltdask.compat.executors:JobExecutor",),
    "libertem.executor.inline": ("InlineJobExecutor=ltdask.compat.executors:InlineJobExecutor",),
    "libertem.executor.concurrent": (
        "ConcurrentJobExecutor=ltdask.compat.executors:ConcurrentJobExecutor",
    ),
    "libertem.executor.dask": ("DaskJobExecutor=ltdask.compat.executors:DaskJobExecutor",),
    "libertem.executor.delayed": ("DelayedJobExecutor=ltdask.compat.executors:DelayedJobExecutor",),
    "libertem.executor.pipelined": ("PipelinedExecutor=ltdask.compat.executors:PipelinedExecutor",),
    "libertem.analysis": ("ltdask.analysis",),
    "libertem.analysis.base": ("ltdask.analysis.base", "ltdask.analysis.results"),
    "libertem.analysis.masks": ("ltdask.analysis.masks",),
    "libertem.analysis.com": (
        "ltdask.analysis.com",
        "apply_correction=ltdask.udf.builtin.com:apply_correction",
        "ltdask.udf.builtin.com_guess",
    ),
    "libertem.analysis.disk": ("DiskMaskAnalysis=ltdask.analysis.masks:DiskMaskAnalysis",),
    "libertem.analysis.ring": ("RingMaskAnalysis=ltdask.analysis.masks:RingMaskAnalysis",),
    "libertem.analysis.point": ("PointMaskAnalysis=ltdask.analysis.masks:PointMaskAnalysis",),
    "libertem.analysis.sum": ("SumAnalysis=ltdask.analysis:SumAnalysis",),
    "libertem.analysis.raw": ("PickFrameAnalysis=ltdask.analysis:PickFrameAnalysis",),
    "libertem.analysis.rawfft": ("PickFFTFrameAnalysis=ltdask.analysis:PickFFTFrameAnalysis",),
    "libertem.analysis.sumfft": ("SumfftAnalysis=ltdask.analysis:SumfftAnalysis",),
    "libertem.analysis.sd": ("SDAnalysis=ltdask.analysis:SDAnalysis",),
    "libertem.analysis.sumsig": ("SumSigAnalysis=ltdask.analysis:SumSigAnalysis",),
    "libertem.analysis.radialfourier": ("ltdask.analysis.radial",),
    "libertem.analysis.fem": ("FEMAnalysis=ltdask.analysis.rings:FEMAnalysis",),
    "libertem.analysis.apply_fft_mask": ("ApplyFFTMask=ltdask.analysis.rings:ApplyFFTMask",),
    "libertem.viz": ("ltdask.views.viz",),
    "libertem.viz.base": ("ltdask.views.viz",),
    "libertem.viz.mpl": ("MPLLive2DPlot=ltdask.views.viz:MPLLive2DPlot",),
}

#: LiberTEM modules that LiberTEM itself removed -> its message on import (an ImportError)
REMOVED_MODULES: dict[str, str] = {
    "libertem.udf.holography": (
        "The holography implementation is removed from LiberTEM (since 0.15) and developed "
        "in LiberTEM-holo (pip install libertem-holo; it runs on ltdask through this alias); "
        "see https://github.com/LiberTEM/LiberTEM-holo"
    ),
}


class AliasError(LtdaskError, ImportError):
    """The alias cannot be turned on (the real ``libertem`` is importable).

    Examples
    --------
    >>> from ltdask.compat import AliasError
    >>> issubclass(AliasError, ImportError)  # caught where an import error is
    True
    """


class NotInLtdaskError(ModuleNotFoundError):
    """A ``libertem`` module that ltdask has no counterpart for."""


def _public_names(module: types.ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and getattr(value, "__module__", "").startswith("ltdask")
        and not isinstance(value, types.ModuleType)
    ]


class AliasModule(types.ModuleType):
    """A ``libertem.*`` module whose names are ltdask's (see `LIBERTEM_MODULES`)."""

    def _sources(self) -> tuple[str, ...]:
        return LIBERTEM_MODULES[self.__name__]

    def _names(self) -> dict[str, str]:
        """Name -> ``"module:attribute"`` of every name this module gives."""
        table: dict[str, str] = {}
        for source in self._sources():
            if "=" in source:
                name, where = source.split("=", 1)
                table.setdefault(name, where)
            else:
                module = importlib.import_module(source)
                for name in _public_names(module):
                    table.setdefault(name, f"{source}:{name}")
        return table

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            if name == "__all__":
                return sorted(self._names())
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        child = f"{self.__name__}.{name}"
        if child in LIBERTEM_MODULES:
            return importlib.import_module(child)
        where = self._names().get(name)
        if where is None:
            raise AttributeError(_missing(self.__name__, name))
        module_name, _, attribute = where.partition(":")
        value = getattr(importlib.import_module(module_name), attribute)
        setattr(self, name, value)
        return value

    def __dir__(self) -> list[str]:
        children = [
            m.rsplit(".", 1)[1]
            for m in LIBERTEM_MODULES
            if m.startswith(self.__name__ + ".") and "." not in m[len(self.__name__) + 1 :]
        ]
        return sorted({*super().__dir__(), *self._names(), *children})

    def __repr__(self) -> str:
        return f"<module {self.__name__!r} (ltdask's LiberTEM alias)>"


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``libertem`` and its submodules in `LIBERTEM_MODULES`."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "libertem" and not fullname.startswith("libertem."):
            return None
        if fullname in REMOVED_MODULES:
            raise NotInLtdaskError(REMOVED_MODULES[fullname], name=fullname)
        if fullname not in LIBERTEM_MODULES:
            parent, _, name = fullname.rpartition(".")
            raise NotInLtdaskError(_missing(parent, name))
        spec = importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        spec.submodule_search_locations = []
        return spec

    def create_module(self, spec):
        return AliasModule(spec.name)

    def exec_module(self, module) -> None:
        module.__doc__ = f"LiberTEM's {module.__name__} on ltdask (ltdask.compat.alias)"


_FINDER = _AliasFinder()


def alias_active() -> bool:
    """Whether the alias is on in this process."""
    return _FINDER in sys.meta_path


def worker_settings() -> dict:
    """``LocalCluster`` / ``Nanny`` keywords that turn the alias on in worker processes too
    (the environment variable, and ``import ltdask`` as a preload), where it is on here;
    else none."""
    if not alias_active():
        return {}
    return {"env": {ENVIRONMENT_VARIABLE: "1"}, "preload": ["ltdask"]}


def alias_requested() -> bool:
    """Whether `ENVIRONMENT_VARIABLE` asks for the alias (set, and not "0" or "false")."""
    value = os.environ.get(ENVIRONMENT_VARIABLE, "").strip().lower()
    return value not in ("", "0", "false", "no", "off")


def alias_libertem() -> None:
    """Make ``import libertem`` (and the modules of `LIBERTEM_MODULES`) resolve to ltdask.

    Raises `AliasError` where the real ``libertem`` is importable or imported: ltdask
    never shadows it. Calling it again does nothing.

    Examples
    --------
    >>> import ltdask.compat
    >>> ltdask.compat.alias_libertem()  # doctest: +SKIP
    >>> from libertem.api import Context  # doctest: +SKIP
    >>> Context is ltdask.compat.Context  # doctest: +SKIP
    True
    """
    if _FINDER in sys.meta_path:
        return
    loaded = sys.modules.get("libertem")
    if loaded is not None and not isinstance(loaded, AliasModule):
        where = getattr(loaded, "__file__", None) or repr(loaded)
        raise AliasError(_refusal(where))
    try:
        real = importlib.util.find_spec("libertem")
    except (ImportError, ValueError):
        real = None
    if real is not None:
        raise AliasError(_refusal(real.origin or str(real.submodule_search_locations)))
    sys.meta_path.insert(0, _FINDER)


def _missing(parent: str, name: str) -> str:
    """The message for ``parent.name``, a LiberTEM name or module ltdask does not have."""
    offered: list[str] = []
    if parent in LIBERTEM_MODULES:
        module = importlib.import_module(parent)
        assert isinstance(module, AliasModule)
        offered = sorted(module._names())
    children = sorted(
        m.rsplit(".", 1)[1]
        for m in LIBERTEM_MODULES
        if m.rsplit(".", 1)[0] == parent and m != parent
    )
    return (
        f"{parent}.{name} is not in ltdask (the LiberTEM alias is on): its {parent} has the "
        f"names {', '.join(offered) or '(none)'} and the modules "
        f"{', '.join(children) or '(none)'}; {_DOCS}"
    )


def _refusal(where: str) -> str:
    return (
        f"ltdask will not alias libertem: the real LiberTEM is importable ({where}). "
        "To run on LiberTEM, leave the alias off (unset "
        f"{ENVIRONMENT_VARIABLE}); to run on ltdask, use an environment without LiberTEM "
        "(pip uninstall libertem) or change the imports to ltdask.compat"
    )


def _main(argv: list[str]) -> None:
    import runpy

    usage = "usage: python -m ltdask.compat.alias (script.py | -m module) [arguments]"
    if not argv or argv[0] in ("-h", "--help"):
        print(usage)
        raise SystemExit(0 if argv else 2)
    alias_libertem()
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit(usage)
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    # the package's module, not this __main__ copy: one finder, one AliasModule class
    from ltdask.compat.alias import _main as main

    main(sys.argv[1:])
