"""Tests for minitorch_proto.data.

Downloads are exercised with ``file://`` URLs only, so the suite needs no network.
The real benchmark files are read from ``../shared/data/mil`` beside the
repository (or from ``$MINITORCH_PROTO_DATA``); those tests are skipped when the
folder is absent.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from minitorch_proto.data import (
    BENCHMARKS,
    CACHE_ENV_VAR,
    DATA_ENV_VAR,
    BagDataset,
    ChecksumError,
    DownloadError,
    default_cache_dir,
    download_file,
    from_dataframe,
    load_bags_csv,
    load_benchmark,
    read_mil_csv,
    read_mil_mat,
    read_split_files,
    sha256_of,
)

# Read before the autouse fixture below clears the variable for every test.
_ENV_DATA = os.environ.get(DATA_ENV_VAR)
SHARED = Path(_ENV_DATA) if _ENV_DATA else Path(__file__).resolve().parents[2] / "shared/data/mil"
HAVE_SHARED = (SHARED / "Musk1.csv").is_file()
needs_shared = pytest.mark.skipif(not HAVE_SHARED, reason=f"benchmark data not found in {SHARED}")

# The table of the data README, typed in independently of BENCHMARKS so that a
# wrong entry there is caught: bags, positive, negative, instances, features, min, max size.
README_TABLE = {
    "musk1": (92, 47, 45, 476, 166, 2, 40),
    "musk2": (102, 39, 63, 6598, 166, 1, 1044),
    "elephant": (200, 100, 100, 1391, 230, 2, 13),
    "fox": (200, 100, 100, 1320, 230, 2, 13),
    "tiger": (200, 100, 100, 1220, 230, 1, 13),
}

# Rows are deliberately out of bag order to check grouping and sorting.
TOY_CSV = "1,2,0.5,1.0\n0,1,1.5,-2.0\n1,2,2.5,3.0\n0,1,3.5,4.0\n0,3,9.0,9.5\n"
TOY_COUNTS = dict(
    n_bags=3, n_positive=1, n_negative=2, n_instances=5, n_features=2, min_bag_size=1, max_bag_size=2
)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    # No test may read the user's data folder or write to the real ~/.cache.
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "default-cache"))


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _toy_benchmark(monkeypatch, src_dir: Path, urls=None) -> Path:
    """Point BENCHMARKS['musk1'] at a tiny CSV served from ``src_dir``."""
    src = _write(src_dir / "Musk1.csv", TOY_CSV)
    info = dataclasses.replace(
        BENCHMARKS["musk1"],
        sha256=hashlib.sha256(TOY_CSV.encode()).hexdigest(),
        urls=tuple(urls) if urls is not None else (src.as_uri(),),
        **TOY_COUNTS,
    )
    monkeypatch.setitem(BENCHMARKS, "musk1", info)
    return src


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _assert_same_data(a: BagDataset, b: BagDataset) -> None:
    assert a.n_bags == b.n_bags
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.bag_ids, b.bag_ids)
    for x, z in zip(a.bags, b.bags):
        np.testing.assert_array_equal(x, z)


# --------------------------------------------------------------------------- #
# Headerless MIL CSV
# --------------------------------------------------------------------------- #
def test_read_mil_csv_groups_rows_into_sorted_bags(tmp_path):
    ds = read_mil_csv(_write(tmp_path / "Toy.csv", TOY_CSV))
    assert ds.name == "toy"
    assert ds.source == str(tmp_path / "Toy.csv")
    np.testing.assert_array_equal(ds.bag_ids, [1, 2, 3])
    np.testing.assert_array_equal(ds.y, [0, 1, 0])
    assert ds.y.dtype == np.int64
    # Within a bag the rows keep their file order.
    np.testing.assert_array_equal(ds.bags[0], [[1.5, -2.0], [3.5, 4.0]])
    np.testing.assert_array_equal(ds.bags[1], [[0.5, 1.0], [2.5, 3.0]])
    np.testing.assert_array_equal(ds.bags[2], [[9.0, 9.5]])
    assert all(b.dtype == np.float64 for b in ds.bags)
    np.testing.assert_array_equal(ds.bag_sizes, [2, 2, 1])


def test_read_mil_csv_maps_minus_one_to_zero(tmp_path):
    ds = read_mil_csv(_write(tmp_path / "pm.csv", "-1,1,0.0\n1,2,1.0\n-1,1,2.0\n"), name="pm")
    assert ds.name == "pm"
    np.testing.assert_array_equal(ds.y, [0, 1])


def test_read_mil_csv_rejects_mixed_labels_in_a_bag(tmp_path):
    path = _write(tmp_path / "bad.csv", "0,1,0.0\n0,7,1.0\n1,7,2.0\n")
    with pytest.raises(ValueError, match=r"bag 7 .*different labels"):
        read_mil_csv(path)


def test_mixed_labels_are_named_as_written(tmp_path):
    from minitorch_proto.data import load_bags_csv

    path = _write(tmp_path / "mix.csv", "bag,label,f\na,0,1\na,1,2\nb,0,3\n")
    with pytest.raises(ValueError, match=r"bag 'a' has instances with different labels \[0, 1\];"):
        load_bags_csv(path)  # it had said [0.0, 1.0]
    path = _write(tmp_path / "mixb.csv", "bag,label,f\na,True,1\na,False,2\nb,True,3\n")
    with pytest.raises(ValueError, match=r"different labels \[False, True\]|different labels \['False', 'True'\]"):
        load_bags_csv(path)


def test_read_mil_csv_rejects_a_header_row(tmp_path):
    path = _write(tmp_path / "hdr.csv", "label,bag,f1\n0,1,0.0\n")
    with pytest.raises(ValueError, match="load_bags_csv"):
        read_mil_csv(path)


def test_read_mil_csv_rejects_too_few_columns(tmp_path):
    with pytest.raises(ValueError, match="column"):
        read_mil_csv(_write(tmp_path / "two.csv", "0,1\n1,2\n"))


def test_damaged_benchmark_files_are_named_in_one_line(tmp_path, shared_mil):
    # Reachable with verify=False / --no-verify: pandas' two-line tokenizer error and scipy's
    # "could not read bytes" named neither the file nor the problem.
    ragged = _write(tmp_path / "ragged.csv", "1,0,1.0,2.0\n2,1,1.0\n3,0,1,1,1,1,1\n")
    with pytest.raises(ValueError, match=r"ragged\.csv: not a MIL CSV file \(.*line 3") as err:
        read_mil_csv(ragged)
    assert "\n" not in str(err.value)
    cut = tmp_path / "musk1.mat"
    cut.write_bytes((shared_mil / "miproblems" / "musk1.mat").read_bytes()[:30_000])
    with pytest.raises(ValueError, match=r"musk1\.mat: could not be read as a \.mat file; is it damaged or truncated"):
        read_mil_mat(cut)


# --------------------------------------------------------------------------- #
# BagDataset
# --------------------------------------------------------------------------- #
def test_bag_dataset_properties_summary_and_subset(tmp_path):
    ds = read_mil_csv(_write(tmp_path / "Toy.csv", TOY_CSV))
    assert (len(ds), ds.n_bags, ds.n_instances, ds.n_features) == (3, 3, 5, 2)
    assert ds.summary() == {
        "name": "toy", "bags": 3, "positive": 1, "negative": 2, "classes": {0: 2, 1: 1},
        "instances": 5, "features": 2, "min_bag_size": 1, "max_bag_size": 2,
    }
    assert repr(ds) == "BagDataset(name='toy', bags=3 (1 positive, 2 negative), instances=5, features=2)"

    sub = ds.subset([2, 0])
    np.testing.assert_array_equal(sub.bag_ids, [3, 1])
    np.testing.assert_array_equal(sub.y, [0, 0])
    assert sub.bags[1] is ds.bags[0]
    assert sub.source == ds.source

    masked = ds.subset(ds.y == 1)
    np.testing.assert_array_equal(masked.bag_ids, [2])
    # A single-class subset keeps its label; it is not renumbered to 0.
    np.testing.assert_array_equal(masked.y, [1])


def test_bag_dataset_rejects_inconsistent_fields():
    with pytest.raises(ValueError, match="labels"):
        BagDataset("x", [np.zeros((2, 3))], y=np.array([0, 1]), bag_ids=np.array([1]))
    with pytest.raises(ValueError, match="bag ids"):
        BagDataset("x", [np.zeros((2, 3))], y=np.array([0]), bag_ids=np.array([1, 2]))
    with pytest.raises(ValueError, match="features"):
        BagDataset("x", [np.zeros((2, 3)), np.zeros((1, 4))], y=[0, 1], bag_ids=[1, 2])
    # predictions.csv and the explanations name bags by id: one id for two bags would mix them.
    with pytest.raises(ValueError, match=r"bag ids repeat \('a'\)"):
        BagDataset("x", [np.zeros((2, 3))] * 3, y=[0, 1, 1], bag_ids=["a", "b", "a"])
    ds = BagDataset("x", [np.zeros((2, 3))] * 3, y=[0, 1, 1], bag_ids=["a", "b", "c"])
    with pytest.raises(ValueError, match="repeat"):
        ds.subset([0, 0])


# --------------------------------------------------------------------------- #
# Downloads
# --------------------------------------------------------------------------- #
def test_sha256_of_matches_hashlib(tmp_path):
    data = os.urandom(3 * (1 << 20) + 17)  # more than one read chunk
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert sha256_of(path) == hashlib.sha256(data).hexdigest()


def test_download_file_from_file_url(tmp_path):
    src = _write(tmp_path / "src" / "data.csv", TOY_CSV)
    dest = tmp_path / "out" / "nested" / "data.csv"
    got = download_file([src.as_uri()], dest, sha256_of(src), progress=True)
    assert got == dest
    assert dest.read_text() == TOY_CSV
    assert _leftovers(dest.parent) == ["data.csv"]


def test_download_file_checksum_mismatch_leaves_nothing(tmp_path):
    src = _write(tmp_path / "src" / "data.csv", TOY_CSV)
    out = tmp_path / "out"
    with pytest.raises(DownloadError) as err:
        download_file([src.as_uri()], out / "data.csv", "0" * 64, progress=False)
    assert "sha256 mismatch" in str(err.value)
    assert sha256_of(src) in str(err.value)
    assert isinstance(err.value, RuntimeError)
    assert _leftovers(out) == []  # neither data.csv nor a .part file


def test_download_file_falls_back_to_second_url(tmp_path):
    src = _write(tmp_path / "src" / "data.csv", TOY_CSV)
    broken = (tmp_path / "missing" / "data.csv").as_uri()
    dest = tmp_path / "out" / "data.csv"
    download_file([broken, src.as_uri()], dest, sha256_of(src), progress=False)
    assert dest.read_text() == TOY_CSV
    assert _leftovers(dest.parent) == ["data.csv"]


def test_download_file_all_urls_fail_lists_them_and_the_manual_route(tmp_path):
    urls = [(tmp_path / "nope1.csv").as_uri(), "unknown-scheme://host/nope2.csv"]
    dest = tmp_path / "out" / "Musk1.csv"
    with pytest.raises(DownloadError) as err:
        download_file(urls, dest, None, progress=False)
    msg = str(err.value)
    for url in urls:
        assert url in msg
    assert str(dest) in msg
    assert DATA_ENV_VAR in msg
    assert _leftovers(dest.parent) == []


def test_download_file_keeps_existing_file_when_download_fails(tmp_path):
    dest = _write(tmp_path / "out" / "data.csv", "old")
    with pytest.raises(DownloadError):
        download_file([(tmp_path / "nope.csv").as_uri()], dest, None, progress=False)
    assert dest.read_text() == "old"
    assert _leftovers(dest.parent) == ["data.csv"]


# --------------------------------------------------------------------------- #
# Cache folder
# --------------------------------------------------------------------------- #
def test_default_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "override"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "override"
    monkeypatch.delenv(CACHE_ENV_VAR)
    assert default_cache_dir() == tmp_path / "xdg" / "minitorch_proto"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "minitorch_proto"


# --------------------------------------------------------------------------- #
# load_benchmark
# --------------------------------------------------------------------------- #
def test_load_benchmark_unknown_name_lists_valid_names():
    with pytest.raises(ValueError) as err:
        load_benchmark("musk3", download=False)
    for valid in ("musk1", "musk2", "fox", "tiger", "elephant"):
        assert valid in str(err.value)


def test_load_benchmark_offline_without_data_names_file_and_env_var(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        load_benchmark("Musk1", download=False, cache_dir=tmp_path / "empty-cache")
    msg = str(err.value)
    assert "Musk1.csv" in msg and DATA_ENV_VAR in msg
    assert str(tmp_path / "empty-cache") in msg


def test_load_benchmark_fake_file_fails_checksum_then_counts(tmp_path):
    folder = tmp_path / "data"
    _write(folder / "Musk1.csv", TOY_CSV)
    with pytest.raises(ChecksumError) as err:
        load_benchmark("musk1", data_dir=folder)
    msg = str(err.value)
    assert BENCHMARKS["musk1"].sha256 in msg
    assert sha256_of(folder / "Musk1.csv") in msg
    assert "verify=False" in msg
    # Without the checksum the counts still give the fake away.
    with pytest.raises(ValueError, match=r"bags: 3 \(expected 92\)"):
        load_benchmark("musk1", data_dir=folder, verify=False)


def test_load_benchmark_explicit_folder_without_file_does_not_download(monkeypatch, tmp_path):
    _toy_benchmark(monkeypatch, tmp_path / "server")
    cache = tmp_path / "cache"
    with pytest.raises(FileNotFoundError) as err:
        load_benchmark("musk1", data_dir=tmp_path / "wrong", cache_dir=cache)
    msg = str(err.value)
    assert str(tmp_path / "wrong") in msg and "Musk1.csv" in msg
    assert "does not exist" in msg
    assert BENCHMARKS["musk1"].urls[0] in msg
    assert _leftovers(cache) == []


def test_load_benchmark_downloads_into_cache_then_reuses_it(monkeypatch, tmp_path):
    broken = (tmp_path / "dead-mirror" / "Musk1.csv").as_uri()
    src = tmp_path / "server" / "Musk1.csv"
    _toy_benchmark(monkeypatch, src.parent, urls=[broken, src.as_uri()])
    cache = tmp_path / "cache"

    first = load_benchmark("MUSK1", cache_dir=cache)
    assert _leftovers(cache) == ["Musk1.csv"]
    assert first.name == "musk1"
    assert first.summary()["bags"] == 3

    src.unlink()  # a second download would now fail
    second = load_benchmark("musk1", cache_dir=cache, download=False)
    _assert_same_data(first, second)
    assert second.source == str(cache / "Musk1.csv")


def test_load_benchmark_default_cache_comes_from_env(monkeypatch, tmp_path):
    _toy_benchmark(monkeypatch, tmp_path / "server")
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "my-cache"))
    load_benchmark("musk1")
    assert (tmp_path / "my-cache" / "Musk1.csv").is_file()


def test_load_benchmark_corrupt_cache_is_fetched_again_or_says_delete(monkeypatch, tmp_path):
    src = _toy_benchmark(monkeypatch, tmp_path / "server")
    cache = tmp_path / "cache"
    _write(cache / "Musk1.csv", TOY_CSV.replace("9.5", "9.6"))
    with pytest.raises(ChecksumError, match="Delete it, or call with download=True"):
        load_benchmark("musk1", cache_dir=cache, download=False)
    # The cache holds only verified downloads: a damaged copy there is fetched again.
    ds = load_benchmark("musk1", cache_dir=cache)
    assert (cache / "Musk1.csv").read_text() == TOY_CSV and ds.summary()["bags"] == 3
    assert _leftovers(cache) == ["Musk1.csv"]
    _write(cache / "Musk1.csv", TOY_CSV.replace("9.5", "9.6"))
    src.unlink()  # offline: the damage is named, and the damaged copy is not replaced by half a file
    with pytest.raises(ChecksumError, match="cached copy is damaged, and fetching it again failed") as err:
        load_benchmark("musk1", cache_dir=cache)
    assert "\n" not in str(err.value)
    # The mirrors' reasons and the fix, not the first line of a list ("...; tried:)").
    assert "FileNotFoundError" in str(err.value) or "URLError" in str(err.value), str(err.value)
    assert str(err.value).endswith("save a good copy of Musk1.csv there.")
    assert _leftovers(cache) == ["Musk1.csv"]
    # A damaged cached file that is not fetched again (a case variant of the name) says so.
    (cache / "Musk1.csv").unlink()
    _write(cache / "musk1.csv", TOY_CSV.replace("9.5", "9.6"))
    with pytest.raises(ChecksumError, match="Delete it; Musk1.csv is then downloaded in its place") as err:
        load_benchmark("musk1", cache_dir=cache)
    # The status table: one line per problem (a download failure had taken eight), a bad limit refused once.
    from minitorch_proto.data.benchmarks import benchmark_status

    (cache / "musk1.csv").unlink()
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)
    monkeypatch.setenv(CACHE_ENV_VAR, str(cache))
    table, problems = benchmark_status(download=True)
    assert all("\n" not in p for p in problems) and problems[0].startswith("musk1: missing: Could not download")
    monkeypatch.setenv("MINITORCH_PROTO_DOWNLOAD_TIMEOUT", "abc")
    with pytest.raises(ValueError, match="MINITORCH_PROTO_DOWNLOAD_TIMEOUT"):
        benchmark_status(cache, download=True)


def test_a_registry_entry_without_a_checksum_is_never_downloaded_unverified(monkeypatch, tmp_path):
    # Before, the download was kept unchecked and every later load called it corrupt ("expected None").
    src = _toy_benchmark(monkeypatch, tmp_path / "server")
    monkeypatch.setitem(BENCHMARKS, "musk1", dataclasses.replace(BENCHMARKS["musk1"], sha256=None))
    cache = tmp_path / "cache"
    with pytest.raises(FileNotFoundError, match="no checksum is known for musk1, so it is not downloaded"):
        load_benchmark("musk1", cache_dir=cache)
    assert _leftovers(cache) == []
    with pytest.raises(ChecksumError, match="no checksum is known .* pass verify=False"):
        load_benchmark("musk1", data_dir=src.parent)
    assert load_benchmark("musk1", data_dir=src.parent, verify=False).summary()["bags"] == 3


def test_load_benchmark_all_mirrors_down(monkeypatch, tmp_path):
    dead = (tmp_path / "dead" / "Musk1.csv").as_uri()
    _toy_benchmark(monkeypatch, tmp_path / "server", urls=[dead])
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError) as err:
        load_benchmark("musk1", cache_dir=cache)
    assert dead in str(err.value) and str(cache / "Musk1.csv") in str(err.value)
    assert _leftovers(cache) == []


def test_load_benchmark_honours_data_env_var(monkeypatch, tmp_path):
    folder = tmp_path / "server"
    _toy_benchmark(monkeypatch, folder, urls=["unknown-scheme://never/Musk1.csv"])
    # The literal name is part of the public interface.
    monkeypatch.setenv("MINITORCH_PROTO_DATA", str(folder))
    ds = load_benchmark("musk1", cache_dir=tmp_path / "cache")
    assert ds.source == str(folder / "Musk1.csv")
    assert _leftovers(tmp_path / "cache") == []

    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path / "elsewhere"))
    with pytest.raises(FileNotFoundError, match=DATA_ENV_VAR):
        load_benchmark("musk1")


def test_load_benchmark_data_dir_beats_env_var(monkeypatch, tmp_path):
    _toy_benchmark(monkeypatch, tmp_path / "a")
    (tmp_path / "b").mkdir()
    shutil.copy(tmp_path / "a" / "Musk1.csv", tmp_path / "b" / "Musk1.csv")
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path / "a"))
    assert load_benchmark("musk1", data_dir=tmp_path / "b").source == str(tmp_path / "b" / "Musk1.csv")


# --------------------------------------------------------------------------- #
# The user's own tables
# --------------------------------------------------------------------------- #
def _user_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "f1": [1.0, 2.0, 3.0, 4.0, 5.0],
            "bag": ["zeta", "alpha", "zeta", "mid", "alpha"],
            "f2": [10, 20, 30, 40, 50],
            "label": [1, 0, 1, 1, 0],
        }
    )


def test_from_dataframe_keeps_first_appearance_order_and_ids():
    ds = from_dataframe(_user_frame(), name="mine")
    assert ds.name == "mine"
    assert list(ds.bag_ids) == ["zeta", "alpha", "mid"]
    np.testing.assert_array_equal(ds.y, [1, 0, 1])
    np.testing.assert_array_equal(ds.bags[0], [[1.0, 10.0], [3.0, 30.0]])
    np.testing.assert_array_equal(ds.bags[1], [[2.0, 20.0], [5.0, 50.0]])
    np.testing.assert_array_equal(ds.bags[2], [[4.0, 40.0]])


def test_to_dataframe_writes_a_csv_that_reads_back_as_the_same_bags(tmp_path):
    ds = from_dataframe(_user_frame(), name="mine")
    table = ds.to_dataframe("case", "dx")
    assert list(table.columns) == ["case", "dx", "f1", "f2"] and len(table) == ds.n_instances
    table.to_csv(tmp_path / "bags.csv", index=False)
    again = load_bags_csv(tmp_path / "bags.csv", bag_col="case", label_col="dx")
    assert list(again.bag_ids) == list(ds.bag_ids) and list(again.feature_names) == ["f1", "f2"]
    np.testing.assert_array_equal(again.y, ds.y)
    for a, b in zip(again.bags, ds.bags):
        np.testing.assert_array_equal(a, b)
    nameless = BagDataset("x", ds.bags, ds.y, ds.bag_ids)
    assert list(nameless.to_dataframe().columns) == ["bag", "label", "feature_1", "feature_2"]
    with pytest.raises(ValueError, match="must differ"):
        ds.to_dataframe("f1", "dx")


def test_from_dataframe_keeps_row_order_inside_bags_when_interleaved():
    rng = np.random.default_rng(0)
    bags = rng.integers(0, 5, size=500)
    df = pd.DataFrame({"bag": bags, "label": bags % 2, "row": np.arange(500)})
    ds = from_dataframe(df)
    np.testing.assert_array_equal(ds.bag_ids, pd.unique(bags))
    for bag_id, bag in zip(ds.bag_ids, ds.bags):
        np.testing.assert_array_equal(bag[:, 0], np.flatnonzero(bags == bag_id))


def test_from_dataframe_feature_cols_and_label_coding():
    df = _user_frame().assign(label=[1, -1, 1, 1, -1])
    ds = from_dataframe(df, feature_cols=["f2"])
    assert ds.n_features == 1
    np.testing.assert_array_equal(ds.bags[0], [[10.0], [30.0]])
    # labels are kept as given (issue 31): -1/+1 stays -1/+1, booleans stay booleans, text stays text
    np.testing.assert_array_equal(ds.y, [1, -1, 1])
    ds_bool = from_dataframe(_user_frame().assign(label=lambda d: d["label"] == 1))
    np.testing.assert_array_equal(ds_bool.y, [True, False, True])
    ds_text = from_dataframe(_user_frame().assign(label=["p", "n", "p", "p", "n"]))
    assert list(ds_text.y) == ["p", "n", "p"]


def test_load_bags_csv_round_trip(tmp_path):
    df = _user_frame().rename(columns={"bag": "patient", "label": "y"})
    path = tmp_path / "cohort.csv"
    df.to_csv(path, sep=";", index=False)
    ds = load_bags_csv(path, bag_col="patient", label_col="y", sep=";")
    _assert_same_data(ds, from_dataframe(df, bag_col="patient", label_col="y"))
    assert ds.name == "cohort" and ds.source == str(path)


@pytest.mark.parametrize(
    "change, pattern",
    [
        (lambda d: d.assign(f2=[10, np.nan, 30, 40, 50]), r"'f2'.*NaN"),
        (lambda d: d.assign(f1=["a", "b", "c", "d", "e"]), r"'f1'.*not numeric"),
        (lambda d: d.assign(label=[1, 0, 0, 1, 0]), r"bag 'zeta'.*different labels"),
        (lambda d: d.iloc[:0], "no rows"),
        (lambda d: d.drop(columns="bag"), r"'bag'.*not found"),
        (lambda d: d.assign(label=[1, 0, 1, np.nan, 0]), r"'label'.*missing"),
        (lambda d: d.assign(bag=["zeta", None, "zeta", "mid", None]), r"'bag'.*missing"),
        # These had given pandas' "truth value of a Series is ambiguous", dropped an imaginary part with a
        # warning, and merged 1 with True (two bags into one, two classes into one).
        (lambda d: d.set_axis(["bag", "bag", *d.columns[2:]], axis=1), "name 'bag' appears twice"),
        (lambda d: d.assign(f1=d["f1"] + 5j), r"'f1'.*not numeric"),
        (lambda d: d.assign(bag=pd.Series([1, True, 1, 0, False], dtype=object)), r"bag column 'bag' mixes True"),
        (lambda d: d.assign(label=pd.Series([True, 0, True, 1, 0], dtype=object)), r"label column 'label' mixes True"),
    ],
    ids=["nan", "string-feature", "mixed-labels", "empty", "no-bag-col", "nan-label", "missing-bag",
         "repeated-name", "complex", "bool-and-number-ids", "bool-and-number-labels"],
)
def test_from_dataframe_bad_inputs(change, pattern):
    with pytest.raises(ValueError, match=pattern):
        from_dataframe(change(_user_frame()))


# --------------------------------------------------------------------------- #
# .mat reader on a file written here
# --------------------------------------------------------------------------- #
def test_read_mil_mat_prtools_layout(tmp_path):
    scipy_io = pytest.importorskip("scipy.io")
    lablist = np.empty((2, 4), dtype=object)
    lablist[0, :] = [np.array(["negative", "positive"], dtype=object), np.array([[0.5, 0.5]]),
                     np.zeros((0, 0)), "crisp"]
    lablist[1, :] = ["millab", 1.0, 0.0, np.zeros((1, 0))]
    x = {
        "data": np.arange(10.0).reshape(5, 2),
        "nlab": np.array([[2], [1], [2], [1], [1]], dtype=np.uint8),
        "lablist": lablist,
        "ident": {"ident": np.arange(1, 6), "milbag": np.array(["bag-b ", "bag-a ", "bag-b ", "bag-a ", "bag-c "])},
    }
    path = tmp_path / "toy.mat"
    scipy_io.savemat(path, {"x": x})
    ds = read_mil_mat(path)
    assert ds.name == "toy"
    np.testing.assert_array_equal(ds.bag_ids, [1, 2, 3])  # numbered by first appearance
    np.testing.assert_array_equal(ds.y, [1, 0, 0])
    np.testing.assert_array_equal(ds.bags[0], [[0.0, 1.0], [4.0, 5.0]])
    np.testing.assert_array_equal(ds.bags[2], [[8.0, 9.0]])


# --------------------------------------------------------------------------- #
# Cross-validation split files
# --------------------------------------------------------------------------- #
def test_read_split_files_on_tmp_files(tmp_path):
    _write(tmp_path / "Toy.csv_rep1_fold2.txt", "4\r\n3\r\n")
    _write(tmp_path / "Toy.csv_rep1_fold1.txt", "1\n2\n\n")
    _write(tmp_path / "Toy.csv_rep2_fold1.txt", "2\n")
    _write(tmp_path / "Other.csv_rep1_fold1.txt", "9\n")
    splits = read_split_files(tmp_path, "toy")
    assert list(splits) == [(1, 1), (1, 2), (2, 1)]
    np.testing.assert_array_equal(splits[(1, 1)], [1, 2])
    np.testing.assert_array_equal(splits[(1, 2)], [4, 3])
    assert splits[(1, 2)].dtype == np.int64

    with pytest.raises(FileNotFoundError, match=r"Nothing.csv_rep1_fold1.txt.*Other"):
        read_split_files(tmp_path, "Nothing")
    _write(tmp_path / "Toy.csv_rep3_fold1.txt", "1\nbag7\n")
    with pytest.raises(ValueError, match="line 2"):
        read_split_files(tmp_path, "Toy")


def test_split_file_folds_refuse_repeats_empty_folds_and_ids_that_collide():
    from minitorch_proto.evaluation.cv import split_file_folds

    ids = np.array([1, 2, 3, 4])
    assert [list(f.test) for f in split_file_folds(ids, {(1, 1): np.array([1, 2]), (1, 2): np.array([3, 4])})] == \
        [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="rep1 fold1 lists bag 2 twice"):
        split_file_folds(ids, {(1, 1): np.array([1, 2, 2])})  # bag 2 had been tested twice
    with pytest.raises(ValueError, match="rep1 fold3 lists no bags"):
        split_file_folds(ids, {(1, 3): np.array([], dtype=np.int64)})
    with pytest.raises(ValueError, match="'001' and '1' are the same number 1"):
        split_file_folds(np.array(["001", "1", "2"]), {(1, 1): np.array([1])})  # one bag had never been tested
    with pytest.raises(ValueError, match="ids are text"):
        split_file_folds(np.array(["b1", "b2"]), {(1, 1): np.array([1])})


@needs_shared
def test_read_split_files_real_elephant_folds():
    splits = read_split_files(SHARED / "folds", "elephant")
    assert sorted(splits) == [(1, f) for f in range(1, 11)]
    ids = [splits[(1, f)] for f in range(1, 11)]
    assert all(len(fold) == 20 for fold in ids)
    union = np.concatenate(ids)
    assert len(np.unique(union)) == 200  # disjoint: 10 x 20 distinct ids
    np.testing.assert_array_equal(np.sort(union), np.arange(1, 201))
    # The authors' folds are stratified: 10 positive and 10 negative test bags each.
    elephant = load_benchmark("elephant", data_dir=SHARED)
    for fold in ids:
        labels = elephant.y[np.searchsorted(elephant.bag_ids, fold)]
        assert labels.sum() == 10


# --------------------------------------------------------------------------- #
# The real benchmark files
# --------------------------------------------------------------------------- #
@needs_shared
def test_benchmark_table_matches_sha256sums_file():
    sums = dict(
        reversed(line.split(None, 1)) for line in (SHARED / "SHA256SUMS").read_text().splitlines() if line.strip()
    )
    for key, info in BENCHMARKS.items():
        assert sums[info.file_name] == info.sha256, key
        assert sums[f"miproblems/{info.mat_file}"] == info.mat_sha256, key
        row = README_TABLE[key]
        assert (info.n_bags, info.n_positive, info.n_negative, info.n_instances,
                info.n_features, info.min_bag_size, info.max_bag_size) == row


@needs_shared
@pytest.mark.parametrize("name", sorted(README_TABLE))
def test_real_benchmark_counts_match_readme(name):
    ds = load_benchmark(name, data_dir=SHARED)
    s = ds.summary()
    got = (s["bags"], s["positive"], s["negative"], s["instances"], s["features"],
           s["min_bag_size"], s["max_bag_size"])
    assert got == README_TABLE[name]
    np.testing.assert_array_equal(ds.bag_ids, np.arange(1, s["bags"] + 1))
    assert set(np.unique(ds.y).tolist()) == {0, 1}


@needs_shared
@pytest.mark.parametrize("name", sorted(README_TABLE))
def test_real_mat_equals_csv(name):
    from_csv = read_mil_csv(SHARED / BENCHMARKS[name].file_name)
    from_mat = read_mil_mat(SHARED / "miproblems" / BENCHMARKS[name].mat_file)
    _assert_same_data(from_csv, from_mat)


@needs_shared
def test_load_benchmark_falls_back_to_mat(tmp_path):
    (tmp_path / "miproblems").mkdir()
    shutil.copy(SHARED / "miproblems" / "fox.mat", tmp_path / "miproblems" / "fox.mat")
    ds = load_benchmark("fox", data_dir=tmp_path)
    assert ds.source == str(tmp_path / "miproblems" / "fox.mat")
    _assert_same_data(ds, read_mil_csv(SHARED / "Fox.csv"))



def test_the_datasets_command_says_which_file_is_missing_which_corrupt_and_the_fix(tmp_path, shared_mil, capsys):
    from minitorch_proto.cli import main

    for name in ("Musk1.csv", "Musk2.csv", "Elephant.csv"):
        shutil.copy(shared_mil / name, tmp_path / name)
    (tmp_path / "Fox.csv").write_bytes((shared_mil / "Fox.csv").read_bytes()[:100_000])  # cut short
    assert main(["datasets", "--data-dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    out, err = captured.out.splitlines(), captured.err.splitlines()
    status = {line.split()[0]: line.split()[1] for line in out[1:6]}
    assert status == {"musk1": "ok", "musk2": "ok", "fox": "corrupt", "tiger": "missing", "elephant": "ok"}
    assert out[1].split()[2:5] == ["92", "476", "166"]  # counts print as integers beside missing rows
    # Each problem whole on its own line of standard error, in the command line's words (the flags).
    assert len(out) == 6 and len(err) == 2
    assert err[0].startswith("fox: corrupt: ") and err[0].endswith("add --no-verify.")
    assert err[1].startswith("tiger: missing: Tiger.csv not found in ") and "--data-dir" in err[1]
    # --no-verify, as the other commands have: the cut file is then read, and found unusable.
    assert main(["datasets", "--data-dir", str(tmp_path), "--no-verify"]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines()[3].split()[:2] == ["fox", "unusable"]
    assert captured.err.splitlines()[0].startswith("fox: unusable: ")
    # A file given as the folder is a usage error, in one line.
    assert main(["datasets", "--data-dir", str(tmp_path / "Musk1.csv")]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def test_load_bags_csv_on_a_headerless_file_says_how_to_read_it(shared_mil):
    from minitorch_proto import load_bags_csv

    with pytest.raises(ValueError, match="first row looks like data, not names: read the file with header=None"):
        load_bags_csv(shared_mil / "Musk1.csv")  # the benchmarks' layout: label, bag, features, no header
    data = load_bags_csv(shared_mil / "Musk1.csv", header=None, bag_col=1, label_col=0)  # as the message says
    assert (data.n_bags, data.n_features) == (92, 166)


def test_read_mil_csv_keeps_bag_ids_beyond_2_to_the_53(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("1,9007199254740993,0.1,0.2\n1,9007199254740992,0.3,0.4\n0,5,1,1\n")
    data = read_mil_csv(path)  # the ids had gone through float64: two bags merged under one wrong id
    assert data.bag_ids.tolist() == [5, 9007199254740992, 9007199254740993] and data.n_bags == 3
    path.write_text("1,9007199254740993.0,0.1,0.2\n0,5,1,1\n")
    with pytest.raises(ValueError, match="beyond 2\\*\\*53"):
        read_mil_csv(path)


def test_a_continuous_label_names_its_file_and_column(tmp_path):
    from minitorch_proto import load_bags_csv

    path = tmp_path / "lab.csv"
    pd.DataFrame({"bag": ["a", "a", "b"], "label": [1.5, 1.5, 2], "f": [1, 2, 3]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"lab.csv: label column 'label' must hold class labels"):
        load_bags_csv(path)
    with pytest.raises(FileNotFoundError, match="is a file, not a folder"):
        read_split_files(path, "musk1")


def test_read_mil_csv_refuses_one_id_spelled_two_ways(tmp_path):
    path = tmp_path / "ids.csv"
    path.write_text("1,007,0.1,0.2\n1,7,0.3,0.4\n0,8,1,1\n0,9,1,2\n")
    with pytest.raises(ValueError, match="bag ids '007' and '7' in column 2 are one number"):
        read_mil_csv(path)  # the two bags had been one bag 7 of two instances
    data = load_bags_csv(path, header=None, bag_col=1, label_col=0)  # as the message says
    assert data.bag_ids.tolist() == ["007", "7", "8", "9"]


def test_read_mil_csv_refuses_bag_ids_past_64_bits(tmp_path):
    path = tmp_path / "huge.csv"
    path.write_text(f"1,{2**63 + 1},0.1,0.2\n0,{2**63 + 2},1,1\n")
    with pytest.raises(ValueError, match="beyond 2\\*\\*63 - 1"):
        read_mil_csv(path)  # they had come back negative


def test_the_constant_columns_method_md_counts_stay_finite_once_standardised(shared_mil):
    """book/method.md and BagStandardizer's notes give 106 to 120 constant columns of 230 (Tiger, Fox, Elephant)."""
    from minitorch_proto.data import load_benchmark
    from minitorch_proto.evaluation import stratified_folds
    from minitorch_proto.preprocessing import BagStandardizer

    counts = {}
    for name in ("tiger", "fox", "elephant"):
        data = load_benchmark(name, data_dir=shared_mil)
        constant = np.concatenate(data.bags).std(0) <= 1e-12
        counts[name] = int(constant.sum())
        fold = stratified_folds(data.y, n_repeats=1, n_folds=10)[0]
        train = [data.bags[i] for i in fold.train]
        std = BagStandardizer("feature").fit(train)
        out = np.concatenate(std.transform([data.bags[i] for i in fold.test]))
        assert np.isfinite(out).all() and np.ptp(out[:, constant], axis=0).max() == 0.0
    assert counts == {"tiger": 106, "fox": 108, "elephant": 120}
