"""The worker list and the choices made from it, without controllers: the id's worker, the
most free worker, the refusals of a bad STATION_WORKERS or workers file."""

from __future__ import annotations

import pytest

from station_sandbox import Client, worker_of_id
from station_sandbox._workers import most_free, parse_workers_env, read_workers_file


def test_an_ids_worker_is_before_its_last_dash():
    assert worker_of_id("w2-abcdefghijklmnopqrstuvwxyz") == "w2"
    assert worker_of_id("eu-1-abcdefghijklmnopqrstuvwxyz") == "eu-1"


def _st(name, free, avail, up=True):
    return {"name": name, "up": up, "capacity": {"workspaces": {"free": free},
                                                 "memoryBytes": {"available": avail}}}


def test_most_free_by_slots_then_memory_then_order():
    assert most_free([_st("a", 1, 9), _st("b", 2, 1), _st("c", 2, 1)])["name"] == "b"
    assert most_free([_st("a", 2, 1), _st("b", 2, 5), _st("c", 1, 99)])["name"] == "b"
    assert most_free([_st("a", 9, 9, False), _st("b", 0, 0)])["name"] == "b"
    assert most_free([_st("a", 9, 9, False)]) is None


def test_station_workers_and_the_argument():
    got = parse_workers_env(" w1=http://h1:8080 , w2=unix:/run/s.sock,")
    assert [(w.name, w.url) for w in got] == [("w1", "http://h1:8080"), ("w2", "unix:/run/s.sock")]
    with pytest.raises(ValueError, match="STATION_WORKERS: no workers"):
        parse_workers_env("")
    with pytest.raises(ValueError, match="is not unix:/absolute/path"):
        parse_workers_env("w2=unix:relative")
    with pytest.raises(ValueError, match="give either workers or socket_path/url/root_dir"):
        Client(workers={}, url="http://h")
    with pytest.raises(ValueError, match="without line breaks"):
        Client(workers=[{"name": "w1", "url": "http://h", "token": "a\nb"}])


def test_a_workers_file(tmp_path):
    f = tmp_path / "workers"
    f.write_text("w1 http://h1:8080\n  # nothing\nw2\n")
    with pytest.raises(ValueError) as e:
        read_workers_file(str(f))
    assert str(e.value) == f"workers file {f}, line 3: want NAME URL [TOKEN-FILE]"
    f.write_text("w1 http://h1:8080 missing.token\n")
    with pytest.raises(ValueError, match="line 1: token file .*missing.token: No such file"):
        read_workers_file(str(f))
    t = tmp_path / "t"
    t.write_text("two words\n")
    t.chmod(0o600)
    f.write_text("w1 http://h1:8080 t\n")
    with pytest.raises(ValueError, match="not one token of printable ASCII without spaces"):
        read_workers_file(str(f))
    t.write_text("s3cret\n")
    assert [(w.name, w.token) for w in read_workers_file(str(f))] == [("w1", "s3cret")]
    f.write_text("#" * (256 * 1024 + 1))
    with pytest.raises(ValueError, match="larger than 262144 bytes"):
        read_workers_file(str(f))
