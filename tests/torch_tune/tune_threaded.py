"""A loader module that starts a thread when imported (tune must not fork trials from a
process with it running)."""

from __future__ import annotations

import threading
import time

from tune_factories import small

threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()

#: The factory (tune_factories.small).
loader = small
