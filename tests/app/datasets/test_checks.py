"""The datasets check their files with the one helper of app/files.py: `regular_file` accepts exactly
what `app.files.check_regular` accepts (same size), and refuses the rest with one DatasetError line naming
the field and the file, never an OSError."""
from __future__ import annotations

import os
import socket

import pytest

from app.datasets.checks import regular_file
from app.datasets.errors import DatasetError
from app.files import check_regular, regular_size


def _places(tmp_path):
    regular = tmp_path / "data.csv"
    regular.write_text("a,b\n1,0\n", encoding="utf-8")
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    return sock, {
        "regular": (regular, None), "empty": (empty, None),
        "folder": (folder, "is a folder; expected a file."),
        "fifo": (fifo, "is not a regular file (a pipe, socket or device)"),
        "socket": (sock_path, "is not a regular file (a pipe, socket or device)"),
        "device": ("/dev/null", "is not a regular file (a pipe, socket or device)"),
        "missing": (tmp_path / "nope.csv", "file not found."),
        "under a file": (regular / "x.csv", "file not found (a part of the path is a file, not a folder)."),
    }


def test_regular_file_agrees_with_the_file_helper_and_says_why_in_one_line(tmp_path):
    sock, places = _places(tmp_path)
    try:
        for kind, (path, why) in places.items():
            try:
                check_regular(path, 1 << 40)
                helper_ok = True
            except OSError:
                helper_ok = False
            if why is None:
                assert helper_ok and regular_file(path, "path") == regular_size(path) == os.path.getsize(path)
                continue
            assert not helper_ok, kind
            with pytest.raises(DatasetError) as info:
                regular_file(path, "path")
            assert str(info.value) == f"dataset.path = {path}: {why}" or \
                str(info.value).startswith(f"dataset.path = {path}: {why}"), (kind, str(info.value))
            assert "\n" not in str(info.value) and "Errno" not in str(info.value)
    finally:
        sock.close()


def test_a_nul_in_the_path_is_a_plain_line_too():
    with pytest.raises(DatasetError, match=r"not a valid file path"):
        regular_file("bad\0name.csv", "path")
