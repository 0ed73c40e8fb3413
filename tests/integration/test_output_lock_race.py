"""`OutputLock` from several processes taking and releasing it as fast as they can: never held by two at once.

The holder removes the lock file before it releases the lock; a process that opened the old file just before can
then lock it while a third creates and locks a new one. The lock must notice that the file it locked is no longer
the one at the path."""

from __future__ import annotations

import subprocess
import sys

RACER = """
import os, sys, time
from uatlab.errors import InputError
from uatlab.io_safety import OutputLock

target, inside, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
held = overlaps = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        with OutputLock(target):
            held += 1
            try:  # exclusive creation: fails if another holder is inside too
                fd = os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                overlaps += 1
                continue
            os.close(fd)
            time.sleep(0.0005)
            os.unlink(inside)
    except InputError:
        pass
print(held, overlaps)
"""


def test_the_output_lock_is_never_held_by_two_processes(tmp_path):
    target, inside = tmp_path / "out.bin", tmp_path / "inside"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(target), str(inside), "4"], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    counts = [tuple(map(int, r.communicate(timeout=120)[0].split())) for r in racers]
    assert all(r.returncode == 0 for r in racers)
    held = sum(h for h, _ in counts)
    overlaps = sum(o for _, o in counts)
    assert held > 100, counts  # the lock was taken often enough for a race to show
    assert overlaps == 0, f"the lock was held by two processes at once {overlaps} times in {held}"
    assert not (tmp_path / ".out.bin.lock").exists()
