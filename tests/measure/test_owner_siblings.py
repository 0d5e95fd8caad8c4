"""Workers counted through their siblings: real forked processes, not just the blocks seen."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from shmguard.measure.owners import _proc_facts, _worker_siblings

# A parent that forks three children (same command line, like DataLoader workers) and starts
# one helper with another command line (like multiprocessing's resource tracker).
PARENT = """
import os, subprocess, sys, time
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
kids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
print(" ".join(map(str, kids)), helper.pid, flush=True)
time.sleep(30)
"""


def test_one_creator_brings_its_forked_siblings_not_other_children() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        *kids, helper = parent.stdout.readline().split()
        tree = [parent.pid, *(c.pid for c in psutil.Process(parent.pid).children())]
        time.sleep(0.1)
        found = _worker_siblings(tree, {kids[0]})
        assert found == set(kids)  # host pids here: the test runs in no PID namespace
        assert helper not in found and str(parent.pid) not in found
        assert _worker_siblings(tree, {"999999999"}) == set()
    finally:
        for c in psutil.Process(parent.pid).children(recursive=True):
            c.kill()
        parent.kill()
        parent.wait()


def test_a_sibling_stopped_since_the_previous_scan_still_counts() -> None:
    # A loader that fails within a scan interval of its first batch shuts its workers down
    # while the scan that first sees a block runs: the processes seen at the previous scan
    # (earlier) keep the stopped worker counted.
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        *kids, _helper = parent.stdout.readline().split()
        tree = [parent.pid, *(c.pid for c in psutil.Process(parent.pid).children())]
        time.sleep(0.1)
        earlier = {pid: f for pid in tree if (f := _proc_facts(pid)) is not None}
        now = [pid for pid in tree if pid != int(kids[2])]  # exited and reaped since
        assert _worker_siblings(now, {kids[0]}) == set(kids[:2])
        assert _worker_siblings(now, {kids[0]}, earlier) == set(kids)
    finally:
        for c in psutil.Process(parent.pid).children(recursive=True):
            c.kill()
        parent.kill()
        parent.wait()
