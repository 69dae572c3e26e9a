"""The suite's hang guard (tests/conftest.py): a test that runs past the limit ends its pytest process with
the test's id and the stack of every thread on stderr; a test within the limit is untouched."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pytest(tmp_path: Path, body: str, limit: str) -> subprocess.CompletedProcess:
    test = tmp_path / "test_guarded.py"
    test.write_text(body)
    env = dict(os.environ, WIREGRAD_TEST_TIMEOUT=limit,
               PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT)]))
    # the guard comes in as the plugin `conftest` (tests/conftest.py); the temporary folder has no conftest
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
                           "-p", "no:timeout", "--rootdir", str(tmp_path), str(test)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)


def test_a_test_past_the_limit_ends_the_run_with_every_threads_stack(tmp_path):
    body = ("import threading, time\n"
            "def test_stuck_forever():\n"
            "    threading.Thread(target=lambda: time.sleep(60), name='helper', daemon=True).start()\n"
            "    time.sleep(60)\n")
    proc = _pytest(tmp_path, body, "2")
    assert proc.returncode == 1
    assert "test_guarded.py::test_stuck_forever ran past 2 s" in proc.stderr
    assert "in test_stuck_forever" in proc.stderr  # the main thread's frame
    assert proc.stderr.count("hread 0x") >= 3  # main, the helper and the guard itself ("Current thread")
    assert " passed" not in proc.stdout


def test_tests_within_the_limit_pass_untouched(tmp_path):
    body = ("import time\n"
            "def test_quick():\n    assert 1 + 1 == 2\n"
            "def test_a_little_longer_than_one_tick():\n    time.sleep(1.5)\n")
    proc = _pytest(tmp_path, body, "4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout and "ran past" not in proc.stderr
