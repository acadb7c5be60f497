"""LiberTEM-live's ``hooks=`` and ``drain=`` on ``LiveContext``: ``on_ready_for_data``
triggers the scan of the package's Merlin and DECTRIS simulators once ltdask has armed them
(the frames follow only then), ``on_determine_nav_shape`` and -1 placeholders give a
passive acquisition its scan shape; results against ``open_mib`` and numpy."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.merlinstreams import NAV, assert_same_results, nothing_left_behind, udfs, write_scan

import ltdask
from ltdask.acquire import MerlinControl
from ltdask.acquire.simulate.merlin import MerlinSimulator
from ltdask.compat import DetermineNavShapeEnv, Hooks, LiveContext, ReadyForDataEnv
from ltdask.udf import SumSigUDF, SumUDF


class MerlinTrigger(Hooks):
    """Triggers the simulator's scan (as a scan engine would) when ltdask is ready."""

    def __init__(self, control_port: int, sim: MerlinSimulator) -> None:
        self.control_port, self.sim = control_port, sim
        self.seen: list = []

    def on_ready_for_data(self, env: ReadyForDataEnv) -> None:
        # armed (the simulator has had STARTACQUISITION), and no frame sent before this
        self.seen.append((tuple(env.aq.shape.nav), self.sim.frames_sent))
        with MerlinControl("127.0.0.1", self.control_port) as control:
            control.cmd("SOFTTRIGGER")


@pytest.mark.parametrize("garbage", [False, True], ids=["clean", "junk-drained"])
def test_merlin_hook_triggers_the_scan(tmp_path, garbage):
    hdr, counts = write_scan(tmp_path, "raw12", scan_header=True)
    ds = ltdask.open_mib(str(hdr))
    expected = ltdask.compute(ds, udfs(ds.sig_shape))
    ctx = LiveContext.make_with("inline")
    with nothing_left_behind():
        with MerlinSimulator(
            hdr, port=0, control_port=0, wait_trigger=True, garbage=garbage
        ) as sim:
            hooks = MerlinTrigger(sim.control_port, sim)
            with ctx.make_connection("merlin").open(
                data_port=sim.port, api_port=sim.control_port, drain=garbage
            ) as conn:
                controller = conn.get_active_controller()
                with ctx.make_acquisition(
                    conn=conn, nav_shape=NAV, controller=controller, hooks=hooks
                ) as aq:
                    got = ltdask.compute(aq, udfs(aq.sig_shape))
    assert hooks.seen == [(NAV, 0)]
    assert_same_results(got, expected)
    f64 = counts.astype(np.float64)
    np.testing.assert_array_equal(got[1]["intensity"].values, f64.sum(axis=(1, 2)).reshape(NAV))


def test_a_hook_that_raises_leaves_nothing_behind(tmp_path):
    hdr, _ = write_scan(tmp_path, "raw12", scan_header=True)

    class Broken(Hooks):
        def on_ready_for_data(self, env):
            raise RuntimeError("the scan engine is off")

    ctx = LiveContext.make_with("inline")
    with nothing_left_behind():
        with MerlinSimulator(hdr, port=0, control_port=0, wait_trigger=True) as sim:
            with ctx.make_connection("merlin").open(
                data_port=sim.port, api_port=sim.control_port
            ) as conn:
                with pytest.raises(RuntimeError, match="the scan engine is off"):
                    ctx.make_acquisition(
                        conn=conn, nav_shape=NAV, controller=object(), hooks=Broken()
                    )
            assert sim.frames_sent == 0


def test_dectris_hook_triggers_the_scan():
    pytest.importorskip("zmq")
    from ltdask.acquire import DectrisSource
    from ltdask.acquire.simulate.dectris import DectrisSimulator

    data = np.random.default_rng(8).integers(0, 900, (4, 5, 12, 10)).astype(np.uint16)
    frames = data.reshape(20, 12, 10)
    seen = []

    class Trigger(Hooks):
        def on_ready_for_data(self, env):
            seen.append((tuple(env.aq.shape.nav), dcu.sent))
            DectrisSource(port=dcu.port, api_port=dcu.api_port).command("trigger")

    ctx = LiveContext.make_with("inline")
    ltdask.compute(ltdask.from_array(frames[:2].reshape(1, 2, 12, 10)), [SumUDF()])  # (pool)
    with nothing_left_behind(), DectrisSimulator(frames, port=0, api_port=0) as dcu:
        with ctx.make_connection("dectris").open(data_port=dcu.port, api_port=dcu.api_port) as conn:
            # internal series trigger: arming sends the header, the trigger the frames
            controller = conn.get_active_controller(trigger_mode="ints", frame_time=0.001)
            with ctx.make_acquisition(
                conn=conn, nav_shape=(4, 5), controller=controller, hooks=Trigger()
            ) as aq:
                total, per_frame = ctx.run_udf(dataset=aq, udf=[SumUDF(), SumSigUDF()])
        config = {k: dcu.config.get(k) for k in ("trigger_mode", "nimages", "ntrigger")}
        assert config == {"trigger_mode": "ints", "nimages": 20, "ntrigger": 1}
        assert dcu.rate == 1000  # (frame_time: seconds per frame)
    assert seen == [((4, 5), 0)]
    np.testing.assert_array_equal(total["intensity"].data, frames.sum(axis=0, dtype=np.float64))
    np.testing.assert_array_equal(per_frame["intensity"].data, data.sum(axis=(2, 3)))


def test_passive_nav_shape_from_the_hook_or_the_placeholders():
    data = np.random.default_rng(9).integers(0, 900, (24, 3, 4)).astype(np.uint16)
    asked = []

    class Shape(Hooks):
        def on_ready_for_data(self, env):  # (passive: never called)
            raise AssertionError("on_ready_for_data in passive mode")

        def on_determine_nav_shape(self, env: DetermineNavShapeEnv):
            asked.append(env)
            return (3, 8)

    ctx = LiveContext.make_with("inline")
    expected = data.sum(axis=(1, 2), dtype=np.float64)
    with ctx.make_connection("memory").open(data=data) as conn:
        for nav_shape, hooks, shape in [
            (None, Shape(), (3, 8)),
            ((-1, 4), Shape(), (3, 8)),
            ((-1, 4), None, (6, 4)),
            ((2, -1, 3), None, (2, 4, 3)),
        ]:
            pending = conn.wait_for_acquisition(5)
            with ctx.make_acquisition(
                conn=conn, pending_aq=pending, nav_shape=nav_shape, hooks=hooks
            ) as aq:
                assert aq.nav_shape == shape
                res = ctx.run_udf(dataset=aq, udf=SumSigUDF())
            np.testing.assert_array_equal(res["intensity"].data, expected.reshape(shape))
    assert asked == [(24, None), (24, (-1, 4))]


@pytest.mark.parametrize(
    "nav_shape, match",
    [
        pytest.param((-1, 5), r"nav_shape=\(-1, 5\) does not fit the acquisition's 24", id="5"),
        pytest.param((-1, -1), r"nav_shape=\(-1, -1\) does not fit", id="not-square"),
    ],
)
def test_placeholders_that_do_not_fit(nav_shape, match):
    data = np.zeros((24, 3, 4), np.uint16)
    ctx = LiveContext.make_with("inline")
    with ctx.make_connection("memory").open(data=data) as conn:
        with pytest.raises(ValueError, match=match):
            ctx.make_acquisition(conn=conn, nav_shape=nav_shape)


def test_hooks_that_are_not_hooks_and_a_shape_that_is_not_known():
    data = np.zeros((2, 3, 4, 4), np.uint16)
    ctx = LiveContext.make_with("inline")
    with ctx.make_connection("memory").open(data=data) as conn:
        with pytest.raises(TypeError, match="hooks=<object .*expected a Hooks object"):
            ctx.make_acquisition(conn=conn, hooks=object())

        class Shape(Hooks):
            def on_ready_for_data(self, env):
                return env.aq.shape

        with pytest.raises(AttributeError, match="give make_acquisition\\(nav_shape=...\\)"):
            ctx.make_acquisition(conn=conn, hooks=Shape())


@pytest.mark.parametrize(
    "kind, settings, nav_shape, error, match",
    [
        pytest.param(
            "merlin",
            {"trigger_mode": "exte"},
            NAV,
            TypeError,
            "takes no settings; not trigger_mode",
            id="merlin-settings",
        ),
        pytest.param(
            "dectris",
            {"exposure": 1},
            NAV,
            TypeError,
            "takes trigger_mode, count_time.*not exposure",
            id="unknown",
        ),
        pytest.param(
            "dectris",
            {"enable_file_writing": True},
            NAV,
            NotImplementedError,
            "enable_file_writing=True.*record= writes the frames",
            id="file-writer",
        ),
        pytest.param(
            "dectris",
            {"trigger_mode": "exte"},
            (-1, 6),
            ValueError,
            "trigger_mode='exte'.*give make_acquisition\\(nav_shape=...\\) in full",
            id="no-shape",
        ),
    ],
)
def test_controller_settings_that_do_not_map(kind, settings, nav_shape, error, match):
    ctx = LiveContext.make_with("inline")
    conn = ctx.make_connection(kind).open(data_port=1)
    with pytest.raises(error, match=match):
        controller = conn.get_active_controller(**settings)
        ctx.make_acquisition(conn=conn, nav_shape=nav_shape, controller=controller)


def test_controller_settings_of_each_trigger_mode():
    conn = LiveContext.make_with("inline").make_connection("dectris").open()
    configs = {
        mode: conn.get_active_controller(trigger_mode=mode, count_time=None).detector_config((3, 4))
        for mode in ("exte", "exts", "inte", "ints")
    }
    # LiberTEM-live's rules: a series of 12 on one internal trigger, else 12 triggers
    assert configs["ints"] == {"ntrigger": 1, "nimages": 12, "trigger_mode": "ints"}
    for mode in ("exte", "exts", "inte"):
        assert configs[mode] == {"ntrigger": 12, "nimages": 1, "trigger_mode": mode}
    assert conn.get_active_controller(enable_corrections=False).detector_config(None) == {}
