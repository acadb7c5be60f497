"""The LiberTEM alias: a package written for LiberTEM runs on ltdask unchanged. Each case
runs in a fresh interpreter (the alias changes ``sys.meta_path`` for good)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

TOY = '''
"""A package written for LiberTEM, never edited for ltdask."""
import numpy as np
from libertem.udf import UDF
from libertem.api import Context
from libertem.executor.inline import InlineJobExecutor


class MaxUDF(UDF):
    def get_result_buffers(self):
        return {"maximum": self.buffer(kind="nav", dtype="float32")}

    def process_frame(self, frame):
        self.results.maximum[:] = np.max(frame)


def run(path):
    ctx = Context(executor=InlineJobExecutor())
    ds = ctx.load("npy", path=path)
    return ctx.run_udf(dataset=ds, udf=MaxUDF())["maximum"].data
'''


def python(code: str, tmp_path: Path, env: dict | None = None, args=()):
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    environment.pop("LTDASK_ALIAS_LIBERTEM", None)
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, *args, *(["-c", textwrap.dedent(code)] if code else [])],
        capture_output=True,
        text=True,
        env=environment,
        cwd=tmp_path,
        timeout=300,
    )


@pytest.fixture
def scan(tmp_path):
    data = np.random.default_rng(2).random((3, 4, 5, 6)).astype(np.float32)
    np.save(tmp_path / "scan.npy", data)
    (tmp_path / "toy_libertem_pkg").mkdir()
    (tmp_path / "toy_libertem_pkg" / "__init__.py").write_text(TOY)
    return data


def test_toy_package_runs_through_alias_libertem(tmp_path, scan):
    out = python(
        """
        import numpy as np, ltdask.compat
        ltdask.compat.alias_libertem()
        import toy_libertem_pkg
        np.save("out.npy", toy_libertem_pkg.run("scan.npy"))
        """,
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), scan.max(axis=(2, 3)))


def test_environment_variable_and_runner(tmp_path, scan):
    script = tmp_path / "script.py"
    script.write_text(
        "import sys, numpy as np, toy_libertem_pkg\n"
        "np.save(sys.argv[1], toy_libertem_pkg.run('scan.npy'))\n"
    )
    # LTDASK_ALIAS_LIBERTEM=1 is honoured by `import ltdask` (here in a sitecustomize)
    (tmp_path / "sitecustomize.py").write_text("import ltdask\n")
    out = python("", tmp_path, env={"LTDASK_ALIAS_LIBERTEM": "1"}, args=[str(script), "a.npy"])
    assert out.returncode == 0, out.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), scan.max(axis=(2, 3)))
    (tmp_path / "sitecustomize.py").unlink()
    # without the variable nothing is aliased
    out = python("", tmp_path, args=[str(script), "b.npy"])
    assert "No module named 'libertem'" in out.stderr
    # python -m ltdask.compat.alias script.py args
    out = python("", tmp_path, args=["-m", "ltdask.compat.alias", str(script), "c.npy"])
    assert out.returncode == 0, out.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), scan.max(axis=(2, 3)))


def test_libertem_modules_resolve_to_ltdask(tmp_path):
    out = python(
        """
        import ltdask, ltdask.compat, ltdask.masks, ltdask.udf
        import ltdask.compat.datasets, ltdask.compat.devices, ltdask.udf.builtin.noop
        import ltdask.udf.builtin.com, ltdask.udf.builtin.com_guess
        ltdask.compat.alias_libertem()
        ltdask.compat.alias_libertem()  # again: nothing more
        import libertem, libertem.masks
        from libertem.api import Context
        from libertem.udf.sum import SumUDF
        from libertem.udf.base import UDF, UDFResults
        from libertem.common import Slice, Shape
        from libertem.common.container import MaskContainer
        from libertem.corrections import CorrectionSet
        from libertem.corrections.detector import correct
        from libertem.io.corrections.detector import correct as correct2
        from libertem.executor.dask import DaskJobExecutor
        from libertem.executor.delayed import DelayedJobExecutor
        from libertem.analysis.base import AnalysisResult
        from libertem.viz.mpl import MPLLive2DPlot
        from libertem.io.dataset.base import DataSet
        from libertem.io.dataset.memory import MemoryDataSet
        from libertem.utils.devices import detect
        from libertem.common.backend import set_use_cpu, get_use_cuda
        from libertem.warnings import UseDiscouragedWarning
        from libertem.common.exceptions import UDFException
        from libertem.udf.base import NoOpUDF
        from libertem.analysis.com import apply_correction, guess_corrections
        from libertem.udf.com import GuessResult
        from libertem.common.udf import UDFMethod
        from libertem.common.buffers import InvalidMaskError, BufferWrapper, get_bbox
        assert InvalidMaskError is ltdask.exceptions.InvalidMaskError
        import ltdask.compat.buffers as cb, ltdask.compat.math as cm, ltdask.compat.generate
        assert BufferWrapper is cb.BufferWrapper and get_bbox is cb.get_bbox
        from libertem.common.math import prod, count_nonzero
        assert (prod, count_nonzero) == (cm.prod, cm.count_nonzero)
        from libertem.io.dataset.base import MMapBackend, BufferedBackend, DirectBackend
        import ltdask.compat.io_backends as iob
        assert (MMapBackend, BufferedBackend, DirectBackend) == (
            iob.MMapBackend, iob.BufferedBackend, iob.DirectBackend)
        from libertem.utils.generate import cbed_frame
        assert cbed_frame is ltdask.compat.generate.cbed_frame
        from libertem.masks import _make_circular_mask
        assert _make_circular_mask is ltdask.masks.circular
        from libertem.analysis.sd import SDAnalysis
        from libertem.analysis.sumsig import SumSigAnalysis
        from libertem.analysis.sumfft import SumfftAnalysis
        from libertem.analysis.rawfft import PickFFTFrameAnalysis
        import ltdask.analysis as la
        assert (SDAnalysis, SumSigAnalysis, SumfftAnalysis, PickFFTFrameAnalysis) == (
            la.SDAnalysis, la.SumSigAnalysis, la.SumfftAnalysis, la.PickFFTFrameAnalysis)
        from libertem.analysis.disk import DiskMaskAnalysis
        from libertem.analysis.ring import RingMaskAnalysis
        from libertem.analysis.point import PointMaskAnalysis
        import ltdask.analysis.masks as am
        assert (DiskMaskAnalysis, RingMaskAnalysis, PointMaskAnalysis) == (
            am.DiskMaskAnalysis, am.RingMaskAnalysis, am.PointMaskAnalysis)
        assert UDFMethod.FRAME is ltdask.udf.UDFMethod.FRAME
        assert apply_correction is ltdask.udf.builtin.com.apply_correction
        assert guess_corrections is ltdask.udf.builtin.com_guess.guess_corrections
        assert NoOpUDF is ltdask.udf.builtin.noop.NoOpUDF
        assert UseDiscouragedWarning is ltdask.UseDiscouragedWarning
        assert UDFException is ltdask.exceptions.UDFError
        assert MemoryDataSet is ltdask.compat.datasets.MemoryDataSet
        assert detect is ltdask.compat.devices.detect and get_use_cuda() is None
        c = ltdask.compat
        assert Context is c.Context and SumUDF is ltdask.udf.SumUDF and UDF is ltdask.UDF
        assert MaskContainer is c.MaskContainer and correct is correct2 is c.correct
        assert DaskJobExecutor is c.DaskJobExecutor and Slice is ltdask.Slice
        assert CorrectionSet is ltdask.CorrectionSet and DataSet is ltdask.DataSet
        assert libertem.masks.circular is ltdask.masks.circular
        assert "api" in dir(libertem) and "circular" in libertem.masks.__all__
        from libertem.common.executor import JobCancelledError
        from libertem.udf import UDFRunCancelled
        from libertem.exceptions import UDFRunCancelled as cancelled2
        from libertem.io.dataset.base import DataTile
        assert JobCancelledError is c.JobCancelledError
        assert UDFRunCancelled is cancelled2 is c.UDFRunCancelled
        assert DataTile is ltdask.compat.tiles.DataTile
        import sys
        assert "distributed" not in sys.modules
        """,
        tmp_path,
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize(
    ("statement", "match"),
    [
        pytest.param(
            "from libertem.udf import RecordUDF",
            r"NotInLtdaskError: libertem.udf.RecordUDF is not in ltdask \(the LiberTEM alias "
            r"is on\): its libertem.udf has the names ApplyMasksUDF, .* and the modules FEM",
            id="from-import-name",
        ),
        pytest.param(
            "import libertem.web.server",
            r"NotInLtdaskError: libertem.web is not in ltdask .* the modules analysis, api",
            id="module",
        ),
        pytest.param(
            "import libertem.udf.holography",
            r"NotInLtdaskError: The holography implementation is removed from LiberTEM .* "
            r"LiberTEM-holo",
            id="removed-by-libertem",
        ),
        pytest.param(
            "import libertem.udf; libertem.udf.RecordUDF",
            r"AttributeError: libertem.udf.RecordUDF is not in ltdask",
            id="attribute",
        ),
    ],
)
def test_names_ltdask_lacks(tmp_path, statement, match):
    out = python(f"import ltdask.compat; ltdask.compat.alias_libertem(); {statement}", tmp_path)
    assert out.returncode != 0
    assert __import__("re").search(match, out.stderr), out.stderr


def test_refused_where_the_real_libertem_is_importable(tmp_path, scan):
    (tmp_path / "libertem").mkdir()
    (tmp_path / "libertem" / "__init__.py").write_text("REAL = True\n")
    for how in (
        dict(code="import ltdask.compat; ltdask.compat.alias_libertem()"),
        dict(code="import ltdask", env={"LTDASK_ALIAS_LIBERTEM": "1"}),
        dict(code="import libertem, ltdask.compat; ltdask.compat.alias_libertem()"),
    ):
        out = python(how["code"], tmp_path, env=how.get("env"))
        assert out.returncode != 0
        assert "AliasError: ltdask will not alias libertem: the real LiberTEM is importable" in (
            out.stderr
        )
        assert "unset LTDASK_ALIAS_LIBERTEM" in out.stderr
        assert str(tmp_path / "libertem") in out.stderr


@pytest.mark.slow  # a LocalCluster of worker processes
def test_local_cluster_workers_get_the_alias(tmp_path, scan):
    """Worker processes import the LiberTEM package's UDF module: they need the alias too."""
    script = tmp_path / "cluster_script.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            import numpy as np


            def main():
                import toy_libertem_pkg
                from libertem.api import Context
                from libertem.executor.dask import DaskJobExecutor

                executor = DaskJobExecutor.make_local(
                    cluster_kwargs=dict(n_workers=1, threads_per_worker=1, processes=True)
                )
                with Context(executor=executor) as ctx:
                    ds = ctx.load("npy", path="scan.npy")
                    out = ctx.run_udf(dataset=ds, udf=toy_libertem_pkg.MaxUDF())
                np.save(sys.argv[1], out["maximum"].data)


            if __name__ == "__main__":
                main()
            """
        )
    )
    out = python("", tmp_path, args=["-m", "ltdask.compat.alias", str(script), "d.npy"])
    assert out.returncode == 0, out.stderr[-3000:]
    np.testing.assert_array_equal(np.load(tmp_path / "d.npy"), scan.max(axis=(2, 3)))
