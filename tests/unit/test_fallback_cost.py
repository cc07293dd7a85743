"""The fallback cost model: a fallback's round trip and what replacing it saves, priced on an adapter class."""
from __future__ import annotations

import pytest

from dmlprof.analysis.fallback_cost import device_kernels, list_length, round_trip, saving_ms
from dmlprof.render.terminal import render_text
from dmlprof.replacements.catalog import replacement_for
from dmlprof.report import build_report
from dmlprof.tables.adapter_costs import AdapterCosts, CopyCurve, load_adapter_costs
from session_factory import make_session
from session_kinds import KINDS, _changed

MIB = 1 << 20
#: round numbers, so that each expected figure can be worked out by hand
COSTS = AdapterCosts(key="test", name="a test adapter", measured="nowhere",
                     d2h=CopyCurve(((64, 100.0), (MIB, 200.0))), h2d=CopyCurve(((0, 150.0), (MIB, 350.0))),
                     queued_call_us=20.0, cpu_kernel_bytes_per_us=1000.0)


def test_a_copy_is_priced_between_its_measured_sizes_and_beyond_the_largest_at_the_last_slope():
    curve = CopyCurve(((64, 100.0), (MIB, 200.0), (4 * MIB, 500.0)))
    assert curve.us(0) == curve.us(64) == 100.0
    assert curve.us(MIB) == 200.0
    assert curve.us(2 * MIB + MIB // 2) == pytest.approx(350.0)
    assert curve.us(8 * MIB) == pytest.approx(900.0)  # 100 us per MiB, as from 1 to 4 MiB


def test_a_fallback_copies_each_input_to_the_host_and_its_result_back():
    # two float32 inputs of 1 MiB and one result of 1 MiB: the CPU kernel from the 3 MiB moved
    trip = round_trip("aten::native_group_norm_backward", "", "[[262144], [262144]]", "float32", 3 * MIB, COSTS)
    assert trip.d2h_us == pytest.approx(2 * 200.0)
    assert trip.h2d_us == pytest.approx(350.0)
    assert trip.cpu_us == pytest.approx(3 * MIB / 1000.0)
    assert trip.total_us == pytest.approx(trip.d2h_us + trip.h2d_us + trip.cpu_us)


def test_a_recorded_cpu_time_is_the_kernel_s_time():
    trip = round_trip("aten::cumsum", "", "[[10]]", "float32", 80, COSTS, cpu_us=42.0)
    assert trip.cpu_us == 42.0


def test_an_in_place_foreach_sends_its_out_tensors_over_and_copies_what_it_changed_back():
    # _foreach_lerp_(params, grads) with 3 tensors each; inner lerp.Scalar_out(p, g, w, out=p) per tensor:
    # p, g and out=p go to the host (9 copies), p comes back (3); nothing is returned
    shapes = str([[16]] * 6)
    trip = round_trip("aten::_foreach_lerp_.Scalar", "aten::lerp.Scalar_out=3", shapes, "float32", 6 * 64, COSTS,
                      cpu_us=0.0)
    assert trip.d2h_us == pytest.approx(9 * 100.0)
    assert trip.h2d_us == pytest.approx(3 * COSTS.h2d.us(64))


def test_a_foreach_list_is_as_long_as_the_period_of_its_shapes():
    assert list_length([(3, 3), (3,), (3, 3), (3,)]) == 2
    assert list_length([(4,), (3,), (2,)]) == 3
    assert list_length([]) == 0


def test_a_composite_foreach_on_the_device_counts_one_kernel_per_tensor():
    session = make_session([
        {"op": "aten::_foreach_mul_.Scalar", "shapes": "[[2], [3], [4]]", "time_ns": 1},
        {"op": "aten::_foreach_add_.List", "shapes": "[[2], [3], [4], [2], [3], [4]]", "time_ns": 1},
        {"op": "aten::mm", "shapes": "[[2, 2], [2, 2]]", "time_ns": 1},
    ])
    assert device_kernels(session.ops) == 3 + 3 + 1


def test_the_saving_is_the_round_trip_less_the_added_calls_and_unknown_without_a_count():
    assert saving_ms(10.0, 100, COSTS) == pytest.approx(10.0 - 100 * 20.0 / 1e3)
    assert saving_ms(10.0, None, COSTS) is None


def test_the_shipped_reference_adapter_says_where_each_constant_was_measured():
    costs = load_adapter_costs()
    assert costs.queued_call_us > 0 and costs.d2h.us(MIB) > costs.d2h.us(64)
    assert len(costs.sources) == 4 and all(source.strip() for source in costs.sources)
    assert "benchmarks/results/gpu_dml/" in costs.sources[0] and "benchmarks/results/gpu_dml/" in costs.sources[2]


def test_replacements_say_how_many_device_calls_they_add():
    assert replacement_for("aten::native_group_norm_backward").added_calls == (41.0, 0.0)
    assert replacement_for("aten::lerp.Scalar_out").added_calls == (0.0, 2.0)  # mul_ and add_ per parameter


def test_a_prediction_prices_each_hotspot_and_says_the_figures_are_modelled():
    report = build_report(KINDS["predicted"]())
    by_op = {h.op: h for h in report.hotspots}
    lerp = by_op["aten::_foreach_lerp_.Scalar"]  # 4 inner calls: 8 kernels added
    assert lerp.added_calls == 8 and lerp.round_trip_ms > 0
    assert lerp.saving_ms == pytest.approx(lerp.round_trip_ms - 8 * load_adapter_costs().queued_call_us / 1e3)
    assert by_op["aten::_safe_softmax"].saving_ms is None  # isneginf's replacement's calls are not counted
    costs = report.fallback_costs
    assert costs.saving_ms == pytest.approx(sum(h.saving_ms for h in report.hotspots if h.saving_ms is not None
                                                and h.torch_flag is None))
    assert any(n.label == "Fallback cost" and "modelled, not measured" in n.text for n in report.notes)
    assert "fixing it saves ~" in render_text(report, width=120)


def test_the_emulated_device_is_priced_as_a_prediction_its_host_times_left_aside():
    # its fallback times are this machine's CPU under the emulated device's machinery, not the adapter host's
    live = _changed(KINDS["live_dml"](), backend="emulated-dml")
    untimed = _changed(KINDS["live_dml"](), backend="emulated-dml")
    untimed.ops["time_ns"] = 0
    emulated, zeroed = build_report(live), build_report(untimed)
    assert emulated.fallback_costs.round_trip_ms == pytest.approx(zeroed.fallback_costs.round_trip_ms)
    assert "throughput measured on that GPU" in emulated.fallback_costs.cpu_kernel


def test_a_live_device_s_fallbacks_are_its_own_measured_times_not_modelled():
    report = build_report(KINDS["live_dml"]())
    assert report.fallback_costs is None and all(h.round_trip_ms is None for h in report.hotspots)
