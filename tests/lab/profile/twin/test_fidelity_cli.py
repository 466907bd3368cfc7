"""`vllm-autoscale fidelity`'s flags and records: a bad one is a clear message and status 2 (or 1)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from lab.profile.schema import Knee, dump
from lab.profile.twin import fidelity_cli
from tests.lab.profile.builders import profile, step


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    fidelity_cli.add_arguments(parser)
    return parser.parse_args(argv)


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "profile.json"
    knee = Knee(rate=10.0, concurrency=4.0, kv_usage=0.1, ttft_seconds=0.1, tpot_seconds=0.01)
    dump(profile((step(10.0),), knee=knee, tpot_vs_batch=((1.0, 0.01), (4.0, 0.02))), path)
    return path


def test_a_profile_without_a_knee_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "partial.json"
    dump(profile((step(10.0),)), path)
    assert fidelity_cli.run(_args("--url", "http://127.0.0.1:1", "--profile", str(path))) == 2
    assert "no knee" in capsys.readouterr().err


def test_neither_url_nor_record(profile_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fidelity_cli.run(_args("--profile", str(profile_file))) == 2
    assert "give --url" in capsys.readouterr().err


def test_server_only_needs_somewhere_to_write(profile_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fidelity_cli.run(_args("--url", "http://x", "--profile", str(profile_file), "--server-only")) == 2
    assert "--server-only needs --out" in capsys.readouterr().err


def test_a_record_of_other_rates_is_refused(
    tmp_path: Path, profile_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record swept at other fractions would compare different loads: refused with both lists."""
    record = tmp_path / "server.json"
    record.write_text(json.dumps({"server": [asdict(step(3.0)), asdict(step(6.0))]}))
    args = _args("--server-record", str(record), "--profile", str(profile_file), "--fractions", "0.3,0.6,0.9")
    assert fidelity_cli.run(args) == 1
    err = capsys.readouterr().err
    assert "swept [3.0, 6.0] req/s, not [3.0, 6.0, 9.0]" in err


def test_an_unreadable_record_names_the_file(
    tmp_path: Path, profile_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = tmp_path / "server.json"
    record.write_text('{"server": [{"offered_rate": 3.0}]}')
    assert fidelity_cli.run(_args("--server-record", str(record), "--profile", str(profile_file))) == 1
    assert f"unable to read the server's sweep from {record}" in capsys.readouterr().err


def test_an_unreachable_server_is_one_line(profile_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fidelity_cli.run(_args("--url", "http://127.0.0.1:9", "--profile", str(profile_file))) == 1
    assert "unable to reach http://127.0.0.1:9" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--fractions=0,0.5", "--fractions=a,b"])
def test_bad_fractions_are_refused_by_the_parser(flag: str) -> None:
    with pytest.raises(SystemExit):
        _args("--url", "u", "--profile", "p", flag)


def test_two_records_compare_without_a_server(
    tmp_path: Path, profile_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server swept on the GPU machine and its twin swept elsewhere, each with --server-only: the
    comparison reads both records, prints the table and the criteria, and says which failed."""

    def record(name: str, running: float) -> Path:
        path = tmp_path / name
        steps = [
            replace(step(r, running=running * r / 10), verdict="held", window_seconds=30.0)
            for r in (3.0, 6.0)
        ]
        path.write_text(json.dumps({"server": [asdict(s) for s in steps]}))
        return path

    server, twin = record("server.json", 4.0), record("twin.json", 3.0)
    args = _args(
        "--server-record",
        str(server),
        "--twin-record",
        str(twin),
        "--profile",
        str(profile_file),
        "--fractions",
        "0.3,0.6",
        "--out",
        str(tmp_path / "comparison.json"),
    )
    assert fidelity_cli.run(args) == 1
    out = capsys.readouterr().out
    assert "FAIL running within 15% (or 0.3 requests) at every rate" in out and "-25%" in out
    assert json.loads((tmp_path / "comparison.json").read_text())["ok"] is False


def test_a_server_record_without_fractions_is_compared_at_its_own_rates(
    tmp_path: Path, profile_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A twin of a later profile (knee 10) against a server swept at another profile's fractions (3.3 and
    7.7 req/s): the twin's record must be of those rates, and a record of the profile's own fractions of
    its knee is refused."""
    rates = (3.3, 7.7)

    def record(name: str, at: tuple[float, ...]) -> Path:
        path = tmp_path / name
        steps = [replace(step(r, running=r / 2), verdict="held", window_seconds=30.0) for r in at]
        path.write_text(json.dumps({"server": [asdict(s) for s in steps]}))
        return path

    server = record("server.json", rates)
    same = _args(
        "--server-record",
        str(server),
        "--twin-record",
        str(record("twin.json", rates)),
        "--profile",
        str(profile_file),
    )
    fidelity_cli.run(same)
    out = capsys.readouterr().out
    assert "2 steps from" in out and "3.3" in out and "7.7" in out
    other = _args(
        "--server-record",
        str(server),
        "--twin-record",
        str(record("other.json", (3.0, 6.0))),
        "--profile",
        str(profile_file),
    )
    assert fidelity_cli.run(other) == 1
    assert "swept [3.0, 6.0] req/s, not [3.3, 7.7]" in capsys.readouterr().err
