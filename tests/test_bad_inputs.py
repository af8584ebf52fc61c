"""One table of bad inputs, through the API and the command line.

Every row names a mistake a user can make, how it must be reported (an exception
type for the API, an exit code for the CLI: 2 for usage and input errors) and
words the one-line message must contain, so the message names the problem.
``python -m tests.test_bad_inputs`` runs the table outside pytest and prints it
with counts (case, expected, observed).
"""
from __future__ import annotations

import contextlib
import copy
import http.server
import io
import os
import pickle
import sys
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pytest
import torch

from minitorch_proto.cli import main
from minitorch_proto.data import load_benchmark
from minitorch_proto.data.download import DownloadError, download_file
from minitorch_proto.estimator import PrototypeMILClassifier, load_model
from minitorch_proto.serialization import ModelFileError

try:
    from .conftest import make_concept_bags
except ImportError:  # run as a script
    from tests.conftest import make_concept_bags

FEATURES = ["f0", "f1", "f2", "f3"]
QUICK = ["--epochs", "2", "--prototypes", "3", "--device", "cpu"]


# --------------------------------------------------------------------------- #
# The things a case works with, made once
# --------------------------------------------------------------------------- #
class Env:
    """Files the cases use: a user's CSV, a trained model, broken variants of both."""

    def __init__(self, root: Path) -> None:
        self.root = root
        bags, y = make_concept_bags(n_bags=20, seed=0)
        self.bags, self.y = bags, y
        rows = [dict(bag=f"b{i}", label=int(y[i]), **dict(zip(FEATURES, inst)))
                for i, bag in enumerate(bags) for inst in bag]
        self.frame = pd.DataFrame(rows)
        self.csv = root / "data.csv"
        self.frame.to_csv(self.csv, index=False)
        self.model = root / "model.safetensors"
        self.clf = PrototypeMILClassifier(n_prototypes=3, epochs=2, device="cpu", random_state=0)
        self.clf.fit([pd.DataFrame(b, columns=FEATURES) for b in bags], y)
        self.clf.save(self.model)
        self.marker = root / "MARKER"

    def path(self, name: str) -> Path:
        return self.root / name

    def write_csv(self, name: str, frame: pd.DataFrame) -> Path:
        p = self.path(name)
        frame.to_csv(p, index=False)
        return p

    def flipped_model(self) -> Path:
        data = bytearray(self.model.read_bytes())
        data[-5] ^= 0x10  # inside the last tensor's bytes
        p = self.path("flipped.safetensors")
        p.write_bytes(bytes(data))
        return p

    def evil_model(self) -> Path:
        """A torch.save file whose unpickling would create the marker file."""
        p = self.path("evil.pt")
        torch.save({"format": 1, "payload": _Touch(str(self.marker))}, p)
        return p

    def readonly_dir(self) -> Path:
        if os.geteuid() == 0:
            return Path("/sys")  # not writable even by root
        d = self.path("readonly")
        d.mkdir(exist_ok=True)
        d.chmod(0o555)
        return d


class _Touch:
    """Harmless payload: creates a file when unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


class _Trickle(http.server.BaseHTTPRequestHandler):
    """Announces 1000 bytes and sends one every 0.2 s."""

    def do_GET(self):  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        try:
            for _ in range(1000):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass  # the client gave up, as it should

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def trickle_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/file.csv"
    finally:
        server.shutdown()
        server.server_close()


def _trickle_download(env: Env):
    with trickle_server() as url:
        t0 = time.monotonic()
        try:
            download_file(url, env.path("dl/file.csv"), None, deadline=1.0, timeout=5, progress=False)
        finally:
            assert time.monotonic() - t0 < 8, "the overall deadline was not enforced"


def _clf(env: Env, **params) -> PrototypeMILClassifier:
    """The shared fitted model with other parameters (a shallow copy: the fixture stays intact)."""
    return copy.copy(env.clf).set_params(**params)


def _fit(bags, y, **params):
    return PrototypeMILClassifier(n_prototypes=3, epochs=1, device="cpu", **params).fit(bags, y)


# --------------------------------------------------------------------------- #
# The table
# --------------------------------------------------------------------------- #
@dataclass
class Case:
    """One bad input: ``make(env)`` gives argv (CLI) or a zero-argument callable (API)."""

    name: str
    make: Callable[[Env], object]
    expected: object  # exception type (API) or exit code (CLI)
    words: tuple[str, ...]
    absent: tuple[str, ...] = ()
    # A failed download lists each mirror with its error on its own line, on purpose.
    one_line: bool = True

    @property
    def surface(self) -> str:
        return "CLI" if isinstance(self.expected, int) else "API"


def _bags_with(env: Env, i: int, value: float):
    bags = [b.copy() for b in env.bags]
    bags[i][0, 1] = value
    return bags


CASES = [
    # ---- model files (API)
    Case("model file with flipped bits", lambda e: lambda: load_model(e.flipped_model()), ModelFileError,
         ("integrity",)),
    Case("crafted pickle as model file", lambda e: lambda: load_model(e.evil_model()), ModelFileError,
         ("evil.pt", "safely")),
    Case("folder as model file", lambda e: lambda: load_model(e.root), ModelFileError, ("folder",)),
    Case("empty model file", lambda e: lambda: load_model(_empty(e)), ModelFileError, ("empty",)),
    Case("text file as model file", lambda e: lambda: load_model(_text(e)), ModelFileError,
         ("not a minitorch_proto model",)),
    # ---- estimator (API)
    Case("y holding None", lambda e: lambda: _fit(e.bags, [None, *e.y[1:]]), ValueError, ("none", "y")),
    Case("chunk_size 0", lambda e: lambda: _clf(e, chunk_size=0).predict(e.bags), ValueError,
         ("chunk_size",)),
    Case("chunk_size negative", lambda e: lambda: _clf(e, chunk_size=-5).predict(e.bags), ValueError,
         ("chunk_size",)),
    Case("random_state a string", lambda e: lambda: _fit(e.bags, e.y, random_state="seed"), ValueError,
         ("random_state",)),
    Case("1e30 in training bag 4 (no standardisation)",
         lambda e: lambda: _fit(_bags_with(e, 4, 1e30), e.y, standardization="none"), ValueError,
         ("bags[4]",)),
    Case("1e30 in predicted bag 7", lambda e: lambda: e.clf.predict_proba(
        _bags_with(e, 7, 1e30)), ValueError, ("bags[7]", "rescale"), absent=("standardization=",)),
    Case("random_state negative", lambda e: lambda: _fit(e.bags, e.y, random_state=-1), ValueError,
         ("random_state", "-1")),
    Case("n_seeds fractional", lambda e: lambda: _fit(e.bags, e.y, n_seeds=2.9), ValueError, ("n_seeds", "2.9")),
    Case("betas out of range", lambda e: lambda: _fit(e.bags, e.y, betas=(2, 0.9)), ValueError, ("betas",)),
    Case("layer_norm_eps negative", lambda e: lambda: _fit(e.bags, e.y, layer_norm_eps=-1.0), ValueError,
         ("layer_norm_eps",), absent=("diverged",)),
    Case("class_weight a string", lambda e: lambda: _fit(e.bags, e.y, head="logistic", class_weight="foo"),
         ValueError, ("class_weight", "foo")),
    Case("class_weight naming a class not in y", lambda e: lambda: _fit(e.bags, e.y, head="logistic",
                                                                         class_weight={0: 1, 7: 2}),
         ValueError, ("class_weight", "[7]")),
    Case("complex-valued bags", lambda e: lambda: _fit([b.astype(complex) for b in e.bags], e.y), ValueError,
         ("bags[0]", "complex")),
    Case("model saved onto a folder", lambda e: lambda: e.clf.save(e.root), ValueError, ("folder",)),
    Case("benchmark data_dir is a file", lambda e: lambda: load_benchmark("musk1", data_dir=e.csv),
         FileNotFoundError, ("a file, not a folder",)),
    Case("benchmark download_timeout negative", lambda e: lambda: load_benchmark("musk1", download_timeout=-1),
         ValueError, ("download_timeout",)),
    Case("DataFrame bag missing column f2", lambda e: lambda: e.clf.predict(
        [pd.DataFrame(b, columns=FEATURES).drop(columns="f2") for b in e.bags]), ValueError, ("f2", "missing")),
    Case("DataFrame bag with extra column", lambda e: lambda: e.clf.predict(
        [pd.DataFrame(b, columns=FEATURES).assign(extra=1.0) for b in e.bags]), ValueError, ("extra",)),
    # ---- downloads (API)
    Case("download trickling past the deadline", lambda e: lambda: _trickle_download(e), DownloadError,
         ("deadline",), one_line=False),
    Case("negative download deadline", lambda e: lambda: download_file("file:///nonexistent", e.path("x"), None,
                                                                       deadline=-1, progress=False),
         ValueError, ("deadline",)),
    # ---- command line: inputs
    Case("--model is a folder", lambda e: ["predict", "--model", str(e.root), "--csv", str(e.csv)], 2,
         ("folder",)),
    Case("--model is empty", lambda e: ["predict", "--model", str(_empty(e)), "--csv", str(e.csv)], 2,
         ("empty",)),
    Case("--model is a text file", lambda e: ["predict", "--model", str(_text(e)), "--csv", str(e.csv)], 2,
         ("not a minitorch_proto model",)),
    Case("--model does not exist", lambda e: ["predict", "--model", str(e.path("nosuch.pt")), "--csv",
                                              str(e.csv)], 2, ("nosuch.pt",)),
    Case("--model with flipped bits", lambda e: ["predict", "--model", str(e.flipped_model()), "--csv",
                                                 str(e.csv)], 2, ("integrity",)),
    Case("--model is a crafted pickle", lambda e: ["predict", "--model", str(e.evil_model()), "--csv",
                                                   str(e.csv)], 2, ("safely",)),
    Case("--csv is a folder (predict)", lambda e: ["predict", "--model", str(e.model), "--csv", str(e.root)], 2,
         ("folder",)),
    Case("--csv is a folder (train)", lambda e: ["train", "--csv", str(e.root), "--out", str(e.path("m2")),
                                                 *QUICK], 2, ("folder",)),
    Case("--csv is empty (train)", lambda e: ["train", "--csv", str(_empty(e)), "--out", str(e.path("m2")),
                                              *QUICK], 2, ("empty",)),
    Case("predict CSV missing feature f2", lambda e: ["predict", "--model", str(e.model), "--csv",
                                                      str(e.write_csv("nof2.csv", e.frame.drop(columns="f2")))],
         2, ("f2", "missing")),
    Case("predict CSV with extra column", lambda e: ["predict", "--model", str(e.model), "--csv",
                                                     str(e.write_csv("extra.csv", e.frame.assign(zz=1.0)))],
         2, ("zz",)),
    Case("train CSV without label column", lambda e: ["train", "--csv", str(e.write_csv(
        "nolabel.csv", e.frame.drop(columns="label"))), "--out", str(e.path("m3")), *QUICK], 2, ("label",)),
    Case("train CSV with one class", lambda e: ["train", "--csv", str(e.write_csv(
        "onecls.csv", e.frame.assign(label=1))), "--out", str(e.path("m3")), *QUICK], 2,
        ("--csv", "label column 'label' has 1 distinct"), absent=("y has",)),
    Case("train CSV with continuous labels", lambda e: ["train", "--csv", str(e.write_csv(
        "contlab.csv", e.frame.assign(label=e.frame.label + 0.5))), "--out", str(e.path("m3")), *QUICK], 2,
        ("label column 'label' must hold class labels",), absent=("y must",)),
    Case("train CSV with a text feature", lambda e: ["train", "--csv", str(e.write_csv(
        "textfeat.csv", e.frame.assign(f0=e.frame.f0.astype(str) + "x"))), "--out", str(e.path("m3")), *QUICK], 2,
        ("'f0'", "not numeric"), absent=("feature_cols",)),
    Case("train CSV with 1e30 (--standardization none)", lambda e: ["train", "--csv", str(e.write_csv(
        "huge.csv", e.frame.assign(f1=np.where(e.frame.bag == "b3", 1e30, e.frame.f1)))), "--out",
        str(e.path("m4")), "--standardization", "none", *QUICK], 2, ("'b3'",)),
    Case("predict CSV with 1e30 in bag b5", lambda e: ["predict", "--model", str(e.model), "--csv", str(e.write_csv(
        "huge2.csv", e.frame.assign(f1=np.where(e.frame.bag == "b5", 1e30, e.frame.f1))))], 2, ("'b5'",)),
    Case("explain CSV with 1e30 in bag b5", lambda e: ["explain", "--model", str(e.model), "--csv", str(e.write_csv(
        "huge3.csv", e.frame.assign(f1=np.where(e.frame.bag == "b5", 1e30, e.frame.f1))))], 2, ("'b5'",)),
    Case("explain --coords-key with a CSV", lambda e: ["explain", "--model", str(e.model), "--csv", str(e.csv),
                                                       "--coords-key", "coords"], 2, ("--coords-key needs --bags-dir",)),
    Case("--methods nosuch", lambda e: ["reproduce", "--methods", "nosuch", "--out", str(e.path("r"))], 2,
         ("nosuch",)),
    Case("--download-timeout 0", lambda e: ["cv", "--dataset", "musk1", "--download-timeout", "0"], 2,
         ("download-timeout",)),
    Case("--epochs with no row that takes it", lambda e: ["reproduce", "--methods", "miles", "--epochs", "5",
                                                          "--out", str(e.path("r2"))], 2,
         ("--epochs sets only the paper's prototype rows",)),
    Case("corrupt benchmark copy", lambda e: ["cv", "--dataset", "musk1", "--data-dir", str(_corrupt_musk(e))], 2,
         ("sha256", "--no-verify"), absent=("verify=False",)),
    Case("--prototypes past any int", lambda e: ["train", "--csv", str(e.csv), "--out", str(e.path("m3")),
                                                 "--prototypes", "1" + "0" * 30], 2, ("--prototypes", "too large")),
    # a flag's own name, not the estimator parameter behind it (n_prototypes, lr_prototypes, n_folds)
    Case("--prototypes 0", lambda e: ["train", "--csv", str(e.csv), "--out", str(e.path("m3")), "--prototypes", "0"],
         2, ("--prototypes", "at least 1"), absent=("n_prototypes",)),
    Case("--lr-prototypes -1", lambda e: ["train", "--csv", str(e.csv), "--out", str(e.path("m3")),
                                          "--lr-prototypes", "-1"], 2, ("--lr-prototypes", "> 0"),
         absent=("lr_prototypes",)),
    Case("--lambda-w nan", lambda e: ["cv", "--csv", str(e.csv), "--lambda-w", "nan"], 2, ("--lambda-w", ">= 0")),
    Case("cv --folds 1", lambda e: ["cv", "--csv", str(e.csv), "--folds", "1"], 2, ("--folds", "at least 2"),
         absent=("n_folds",)),
    Case("explain --top 0", lambda e: ["explain", "--model", str(e.model), "--csv", str(e.csv), "--top", "0"], 2,
         ("--top", "at least 1")),
    Case("cv --seed negative", lambda e: ["cv", "--csv", str(e.csv), "--folds", "2", "--seed", "-1"], 2,
         ("--seed", "2**32")),
    Case("--labels without --bags-dir", lambda e: ["train", "--csv", str(e.csv), "--labels", str(e.csv),
                                                   "--out", str(e.path("m4")), *QUICK], 2, ("--labels", "--bags-dir")),
    Case("--bag-col with a benchmark", lambda e: ["train", "--dataset", "musk1", "--bag-col", "x",
                                                  "--out", str(e.path("m5")), *QUICK], 2, ("--bag-col", "benchmark")),
    # ---- command line: --out checked before any work
    Case("train --out ends with a slash", lambda e: ["train", "--csv", str(e.csv), "--out", str(e.path("dir")) + "/",
                                                     *QUICK], 2, ("separator",)),
    Case("train --out is a folder", lambda e: ["train", "--csv", str(e.csv), "--out", str(e.root), *QUICK], 2,
         ("folder",)),
    Case("train --out under a file", lambda e: ["train", "--csv", str(e.csv), "--out", str(e.csv / "m.pt"),
                                                *QUICK], 2, ("data.csv",)),
    Case("train --out in a read-only folder", lambda e: ["train", "--csv", str(e.csv), "--out",
                                                         str(e.readonly_dir() / "m.pt"), *QUICK], 2,
         ("not writable",)),
    Case("predict --out is a folder", lambda e: ["predict", "--model", str(e.model), "--csv", str(e.csv),
                                                 "--out", str(e.root)], 2, ("folder",)),
    Case("explain --out in a read-only folder", lambda e: ["explain", "--model", str(e.model), "--csv", str(e.csv),
                                                           "--out", str(e.readonly_dir() / "ev.csv")], 2,
         ("not writable",)),
    Case("cv --out under a file", lambda e: ["cv", "--csv", str(e.csv), "--folds", "2", "--repeats", "1",
                                             "--out", str(e.csv / "cv.csv"), *QUICK], 2, ("data.csv",)),
    Case("cv --out in a read-only folder", lambda e: ["cv", "--csv", str(e.csv), "--folds", "2", "--repeats", "1",
                                                      "--out", str(e.readonly_dir() / "cv.csv"), *QUICK], 2,
         ("not writable",)),
    Case("reproduce --out is a file", lambda e: ["reproduce", "--datasets", "musk1", "--out", str(e.csv),
                                                 "--quiet"], 2, ("is a file",)),
    Case("reproduce --out in a read-only folder", lambda e: ["reproduce", "--datasets", "musk1", "--out",
                                                             str(e.readonly_dir() / "res"), "--quiet"], 2,
         ("not writable",)),
]


def _empty(env: Env) -> Path:
    p = env.path("empty.pt")
    p.write_bytes(b"")
    return p


def _text(env: Env) -> Path:
    p = env.path("notes.txt")
    p.write_text("these are my notes, not a model\n" * 3)
    return p


def _corrupt_musk(env: Env) -> Path:
    d = env.path("mil")
    d.mkdir(exist_ok=True)
    (d / "Musk1.csv").write_text("1,1,1\n")
    return d


# --------------------------------------------------------------------------- #
# Running a case
# --------------------------------------------------------------------------- #
class _WorkStarted(Exception):
    pass


def run_case(case: Case, env: Env) -> tuple[object, str]:
    """Run one case; returns (observed exception type or exit code, message)."""
    target = case.make(env)
    if case.surface == "API":
        try:
            target()
        except Exception as exc:  # noqa: BLE001 - the table records whatever comes out
            return type(exc), str(exc)
        return "no error", ""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(target)
        except SystemExit as exc:  # argparse's own usage errors
            code = exc.code
        except Exception:  # noqa: BLE001 - a traceback is a failed case, shown as such
            return "traceback", traceback.format_exc(limit=1)
    lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
    return code, (lines[-1] if lines else "")


def check(case: Case, observed, message: str) -> list[str]:
    """What is wrong with an outcome (empty when the case passes)."""
    problems = []
    if case.surface == "API":
        if not (isinstance(observed, type) and issubclass(observed, case.expected)):
            problems.append(f"expected {case.expected.__name__}, got {getattr(observed, '__name__', observed)}")
    elif observed != case.expected:
        problems.append(f"expected exit {case.expected}, got {observed}")
    if case.one_line and "\n" in message.strip():
        problems.append("message is more than one line")
    low = message.lower()
    problems += [f"message lacks {w!r}" for w in case.words if w.lower() not in low]
    problems += [f"message contains {w!r}" for w in case.absent if w.lower() in low]
    if case.surface == "CLI" and not message.startswith(("error:", "usage:", "minitorch-proto")):
        problems.append("last stderr line is not an error line")
    return problems


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    torch.manual_seed(0)
    return Env(tmp_path_factory.mktemp("bad_inputs"))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case: Case, env: Env, monkeypatch):
    # Nothing in the table may reach the network; a benchmark must come from a named folder.
    monkeypatch.setenv("MINITORCH_PROTO_CACHE", str(env.path("cache")))
    monkeypatch.delenv("MINITORCH_PROTO_DATA", raising=False)
    observed, message = run_case(case, env)
    assert not check(case, observed, message), (check(case, observed, message), message)


def test_crafted_model_file_never_runs_its_payload(env: Env):
    # The payload really would run under a plain unpickler; the loader must not give it the chance.
    evil = env.evil_model()
    with pytest.raises(ModelFileError):
        load_model(evil)
    assert main(["predict", "--model", str(evil), "--csv", str(env.csv)]) == 2
    assert not env.marker.exists()
    with open(evil.parent / "plain.pkl", "wb") as fh:
        pickle.dump(_Touch(str(env.marker)), fh)
    with pytest.raises(ModelFileError):
        load_model(evil.parent / "plain.pkl")
    assert not env.marker.exists()


def test_every_single_bit_flip_in_a_model_file_is_caught(env: Env, tmp_path):
    # A flip the reader lets through must change nothing: "1e-08" -> "1E-08", or a 17th digit of a
    # recorded loss that parses to the same double. Which bytes are such digits moves with the file's
    # recorded epoch seconds, so "all 200 caught" failed on about one file in ten.
    data = env.model.read_bytes()
    rng = np.random.default_rng(0)
    caught = 0
    positions = rng.choice(len(data), size=200, replace=False)
    for pos in positions:
        bad = bytearray(data)
        bad[pos] ^= 1 << int(rng.integers(8))
        p = tmp_path / "flip.safetensors"
        p.write_bytes(bytes(bad))
        try:
            loaded = load_model(p)
        except ModelFileError as exc:
            assert "\n" not in str(exc)
            caught += 1
            continue
        assert loaded.get_params() == env.clf.get_params() and loaded.history_ == env.clf.history_, pos
        np.testing.assert_array_equal(loaded.predict_proba(env.bags), env.clf.predict_proba(env.bags))
    assert caught >= len(positions) - 5


def test_out_errors_come_before_any_work(env: Env, monkeypatch):
    # The spy fails the case if data loading (the first piece of work) starts.
    import minitorch_proto.cli as cli

    def spy(*a, **k):
        raise _WorkStarted("work started before --out was checked")

    monkeypatch.setattr(cli, "load_data", spy)
    monkeypatch.setattr(cli, "load_benchmarks", spy)
    for case in CASES:
        if case.surface == "CLI" and "--out" in case.name:
            observed, message = run_case(case, env)
            assert observed == 2, (case.name, observed, message)


def test_stale_part_files_are_removed(tmp_path):
    src = tmp_path / "src.csv"
    src.write_text("a,b\n1,2\n")
    dest = tmp_path / "cache" / "file.csv"
    dest.parent.mkdir()
    stale = dest.parent / ".file.csv.abc123.part"
    stale.write_text("half a download")
    old = time.time() - 3 * 24 * 3600
    os.utime(stale, (old, old))
    fresh = dest.parent / ".file.csv.def456.part"  # may belong to a download running now
    fresh.write_text("in progress")
    download_file(src.as_uri(), dest, None, progress=False)
    assert dest.read_text() == "a,b\n1,2\n"
    assert not stale.exists()
    assert fresh.exists()


def test_download_deadline_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MINITORCH_PROTO_DOWNLOAD_TIMEOUT", "1")
    with trickle_server() as url:
        t0 = time.monotonic()
        with pytest.raises(DownloadError, match="deadline"):
            download_file(url, tmp_path / "f.csv", None, timeout=5, progress=False)
        assert time.monotonic() - t0 < 8
    monkeypatch.setenv("MINITORCH_PROTO_DOWNLOAD_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="MINITORCH_PROTO_DOWNLOAD_TIMEOUT"):
        download_file(url, tmp_path / "f.csv", None, progress=False)


class _Silent(http.server.BaseHTTPRequestHandler):
    """Takes the request and says nothing for 10 s."""

    def do_GET(self):  # noqa: N802 - http.server's naming
        time.sleep(10)

    def log_message(self, *args):
        pass


def test_a_wait_cut_short_by_the_deadline_names_the_deadline(tmp_path):
    # The socket's wait is shortened to what is left of the deadline; when it runs out the message had said
    # only "timed out", with nothing to raise.
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Silent)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/f.csv"
        with pytest.raises(DownloadError, match="overall download deadline of 1 s passed"):
            download_file(url, tmp_path / "f.csv", None, deadline=1.0, timeout=5, progress=False)
        # A wait the deadline did not shorten stays the socket's own timeout.
        with pytest.raises(DownloadError) as info:
            download_file(url, tmp_path / "f.csv", None, deadline=30, timeout=0.5, progress=False)
        assert "deadline" not in info.value.one_line and "timed out" in info.value.one_line
    finally:
        server.shutdown()
        server.server_close()
    assert not list(tmp_path.iterdir())


def print_table() -> int:
    """Run every case and print (case, surface, expected, observed, verdict) with counts."""
    os.environ["MINITORCH_PROTO_CACHE"] = tempfile.mkdtemp()
    os.environ.pop("MINITORCH_PROTO_DATA", None)
    rows = []
    with tempfile.TemporaryDirectory() as root:
        env = Env(Path(root))
        for case in CASES:
            observed, message = run_case(case, env)
            problems = check(case, observed, message)
            exp = case.expected if case.surface == "CLI" else case.expected.__name__
            obs = observed if not isinstance(observed, type) else observed.__name__
            rows.append(dict(case=case.name, surface=case.surface, expected=f"{exp}",
                             observed=f"{obs}", ok="yes" if not problems else "; ".join(problems),
                             message=message[:90]))
    table = pd.DataFrame(rows)
    with pd.option_context("display.max_colwidth", 90, "display.width", 250):
        print(table.to_string(index=False))
    n_ok = int((table.ok == "yes").sum())
    print(f"\n{len(table)} cases ({(table.surface == 'API').sum()} API, {(table.surface == 'CLI').sum()} CLI): "
          f"{n_ok} as expected, {len(table) - n_ok} not.")
    return 0 if n_ok == len(table) else 1


if __name__ == "__main__":
    sys.exit(print_table())


# --------------------------------------------------------------------------- #
# Behaviours the table relies on: round trips, names, seeds
# --------------------------------------------------------------------------- #
def test_model_file_round_trip_keeps_classes_names_and_members(tmp_path):
    bags, y = make_concept_bags(n_bags=16, seed=3)
    labels = np.where(y == 1, "pos", "neg")
    frames = [pd.DataFrame(b, columns=FEATURES) for b in bags]
    clf = PrototypeMILClassifier(n_prototypes=3, epochs=2, device="cpu", n_seeds=2).fit(frames, labels)
    old = os.umask(0o022)
    try:
        path = clf.save(tmp_path / "m.safetensors")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    again = load_model(path)
    assert list(again.classes_) == ["neg", "pos"] and list(again.feature_names_in_) == FEATURES
    assert len(again.models_) == 2
    np.testing.assert_array_equal(again.predict_proba(bags), clf.predict_proba(bags))
    # Columns in another order are matched by name, not position.
    shuffled = [f[FEATURES[::-1]] for f in frames]
    np.testing.assert_array_equal(again.predict_proba(shuffled), clf.predict_proba(bags))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")  # torch's note on its own default protocol
def test_old_torch_files_load_without_unpickling_code(env: Env, tmp_path):
    # The layout version 0.1 wrote: torch.save of a dict holding tensors, NumPy arrays and JSON text.
    import json

    clf = env.clf
    params = {k: (list(v) if isinstance(v, tuple) else v) for k, v in clf.get_params().items()}
    payload = {"format": 1, "params": json.dumps(params), "classes": clf.classes_.tolist(),
               "n_features": int(clf.n_features_in_), "state_dict": clf.model_.state_dict(),
               "standardizer": clf.standardizer_.get_state(), "history": clf.history_}
    torch.save(payload, tmp_path / "old.pt")
    with pytest.warns(UserWarning, match="old model-file format"):
        again = load_model(tmp_path / "old.pt")
    np.testing.assert_array_equal(again.predict_proba(env.bags), clf.predict_proba(env.bags))
    # train --out may replace such a file, but not another torch file (a bag's features), nor a raw pickle.
    from minitorch_proto.serialization import is_model_file

    torch.save(torch.ones(3, 4), tmp_path / "bag.pt")
    torch.save(payload, tmp_path / "raw.pt", _use_new_zipfile_serialization=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # quietly: "save it again" is no advice for a file about to be replaced
        assert is_model_file(tmp_path / "old.pt") and is_model_file(tmp_path / "raw.pt")
    assert not is_model_file(tmp_path / "bag.pt") and is_model_file(env.model)


def test_header_length_with_a_pickle_like_first_byte_is_still_read(tmp_path):
    # safetensors begins with the header length: its low byte can be 0x80, a pickle's first byte.
    from minitorch_proto.serialization import load_model_file, save_model_file

    for pad in range(300):
        p = save_model_file(tmp_path / "t.safetensors", {"w": torch.ones(2)}, {"pad": "x" * pad})
        if p.read_bytes()[0] == 0x80:
            break
    else:
        pytest.fail("no padding gave a 0x80 first byte")
    assert load_model_file(p).header["pad"] == "x" * pad


def test_random_state_follows_scikit_learn(env: Env):
    def weights(rs):
        m = PrototypeMILClassifier(n_prototypes=3, epochs=1, device="cpu", random_state=rs).fit(env.bags, env.y)
        return m.model_.prototypes.detach().numpy().copy()

    np.testing.assert_array_equal(weights(0), weights(0))
    assert not np.array_equal(weights(None), weights(None))  # fresh entropy each fit
    np.testing.assert_array_equal(weights(np.random.RandomState(5)), weights(np.random.RandomState(5)))
    np.testing.assert_array_equal(weights(np.random.default_rng(5)), weights(np.random.default_rng(5)))
    rs = np.random.RandomState(5)
    assert not np.array_equal(weights(rs), weights(rs))  # the stream advances
