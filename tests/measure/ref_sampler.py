"""Independent reference sampler for the tests: statvfs(PATH) at about 1 kHz in its own process.

usage: ref_sampler.py PATH   prints "ready", then on SIGTERM prints "<peak bytes> <polls>".
"""

import contextlib
import os
import signal
import sys
import time

path = sys.argv[1]
stop = False


def _stop(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, _stop)
with contextlib.suppress(OSError):
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(20))
peak = polls = 0
print("ready", flush=True)
while not stop:
    try:
        st = os.statvfs(path)
    except OSError:
        break
    peak = max(peak, (st.f_blocks - st.f_bfree) * st.f_frsize)
    polls += 1
    time.sleep(0.001)
print(peak, polls, flush=True)
