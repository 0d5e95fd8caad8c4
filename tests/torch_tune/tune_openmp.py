"""A loader module that runs a parallel torch operation when imported, which starts the
intra-op (OpenMP) thread pool: native threads, which ``threading`` does not list. A process
forked after it hangs at its first parallel operation (GNU libgomp), so tune must not fork
trials from a process that imported it."""

from __future__ import annotations

import torch
from tune_factories import small

torch.set_num_threads(2)
_x = torch.randn(400, 400)
_x = (_x @ _x).tanh()

#: The factory (tune_factories.small).
loader = small
