"""The own-data page's heatmap example: toy slides whose tumour the evidence should find."""
from __future__ import annotations

import numpy as np
import pytest

from minitorch_proto import book


def test_toy_slides_put_the_tumour_in_positive_slides_only():
    slides = book.make_toy_slides(12, grid=12, random_state=3)
    assert list(slides.y) == [0, 1] * 6 and len(set(slides.ids)) == 12
    for bag, xy, tumour, label in zip(slides.bags, slides.coords, slides.tumour, slides.y):
        assert bag.shape == (len(xy), 32) and xy.shape[1] == 2 and (xy % 256 == 0).all()
        assert len(np.unique(xy, axis=0)) == len(xy)  # one patch per grid cell
        assert tumour.any() == bool(label)
    again = book.make_toy_slides(12, grid=12, random_state=3)
    np.testing.assert_array_equal(again.bags[5], slides.bags[5])


def test_the_evidence_finds_the_tumour_of_held_out_slides(tmp_path):
    pytest.importorskip("h5py")
    demo = book.slide_evidence_demo(tmp_path / "slides", 36, random_state=0)
    assert sorted((tmp_path / "slides").glob("*.h5"))  # written as a user's folder, read back lazily
    table, slides = demo["table"], demo["slides"]
    assert set(table["bag"]) == {slides.ids[i] for i in demo["test"]} and len(demo["test"]) == 12
    assert table["tumour"].sum() == sum(slides.tumour[i].sum() for i in demo["test"])
    # Measured at this seed: bag AUC .944, evidence AUC .873; random evidence would sit near .5.
    assert demo["bag_auc"] >= 0.8 and demo["evidence_auc"] >= 0.75
    fig = book.plot_slide_maps(demo, n=3)
    assert len(fig.axes) == 4  # three maps and one colour bar
    titles = [ax.get_title() for ax in fig.axes[:3]]
    assert ["tumour outlined" in t for t in titles] == [True, True, False]  # two positives, then a negative


def test_the_folder_benchmark_runs_and_reports_every_step(capsys):
    # benchmarks/bench_folder_explain.py: tiny shapes, only that it runs and reports what it says.
    import importlib.util
    import json
    from pathlib import Path

    pytest.importorskip("h5py")
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_folder_explain.py"
    spec = importlib.util.spec_from_file_location("bench_folder_explain", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(["--bags", "10", "--grid", "4", "--features", "8"])
    assert set(result["seconds"]) == {"predict", "explain", "draw"} and result["instances_per_bag"] == 16
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == result
