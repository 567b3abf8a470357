"""The worker list and the choices made from it, without controllers: the id's worker, the
most free worker, the refusals of a bad STATION_WORKERS or workers file."""

from __future__ import annotations

import pytest

from station_sandbox import Client, worker_of_id
from station_sandbox._workers import parse_workers_env, place, read_workers_file


def test_an_ids_worker_is_before_its_last_dash():
    assert worker_of_id("w2-abcdefghijklmnopqrstuvwxyz") == "w2"
    assert worker_of_id("eu-1-abcdefghijklmnopqrstuvwxyz") == "eu-1"


def _st(name, free, avail, up=True, tenant=None, caller=None):
    return {"name": name, "url": "http://" + name, "up": up, "error": None if up else "refused",
            "tenant": tenant, "caller": caller or {"scope": "tenant", "tenant": "a"},
            "capacity": {"workspaces": {"free": free}, "memoryBytes": {"available": avail}}}


def test_placement_by_slots_then_memory_then_order():
    assert place([_st("a", 1, 9), _st("b", 2, 1), _st("c", 2, 1)])[0]["name"] == "b"
    assert place([_st("a", 2, 1), _st("b", 2, 5), _st("c", 1, 99)])[0]["name"] == "b"
    assert place([_st("a", 9, 9, False), _st("b", 1, 0)])[0]["name"] == "b"


def test_placement_skips_another_tenants_private_worker_and_prefers_its_own():
    ws = [_st("w1", 1, 1), _st("w2", 50, 50, tenant="b")]
    assert place(ws)[0]["name"] == "w1"
    for w in ws:
        w["caller"] = {"scope": "tenant", "tenant": "b"}
    assert place(ws)[0]["name"] == "w2"
    ws[1]["capacity"]["workspaces"]["free"] = 0  # its own is full: a shared one then
    assert place(ws)[0]["name"] == "w1"
    admin = [_st("w1", 1, 1, caller={"scope": "admin"}),
             _st("w2", 50, 50, tenant="b", caller={"scope": "admin"})]
    assert place(admin)[0]["name"] == "w2"


def test_placement_says_why_each_worker_was_skipped():
    best, why = place([_st("w1", 9, 9, False), _st("w2", 9, 9, tenant="b"), _st("w3", 0, 9)])
    assert best is None
    assert why == ("worker w1 (http://w1) did not answer: refused; worker w2 is private to "
                   "another tenant; worker w3 is full")


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
