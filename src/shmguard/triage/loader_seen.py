"""The PyTorch DataLoader a log (or a configuration read with it) shows, as ``plan``'s request.

``explain`` sizes a DataLoader failure from what its inputs show of the loader, through the
one size decision (:func:`shmguard.estimate.decide.choose_shm`): the DataLoader model's
predicted peak for that loader (:func:`shmguard.estimate.plan.make_plan`, the figure ``shmguard
plan`` sizes from) is the decision's ``model`` evidence. This module only reads the
parameters; it sizes nothing.

Read from every input line that holds one of :data:`LITERALS` (the matcher feeds them), the
first value of each seen:

* ``num_workers`` (``num_workers=4``, ``num_workers: 4``, ``"num_workers": 4``,
  ``--num-workers 4``, or PyTorch's own warning ``This DataLoader will create 4 worker
  processes in total``, torch/utils/data/dataloader.py ``check_worker_number_rationality``),
  ``prefetch_factor`` (default: PyTorch's 2) and torchrun's
  ``--nproc_per_node`` (local ranks sharing /dev/shm; default 1);
* a batch as PyTorch prints it, ``torch.Size([32, 3, 224, 224])``: the largest seen (the
  batch, not its labels or a model output), its first dimension the batch size; its dtype from
  ``dtype=torch.uint8`` (default float32, ``plan``'s default);
* ``shmguard.io/dataloader: num_workers=4,batch_size=32,sample_shape=3x224x224`` in a manifest
  or Compose file given with the log: the annotation ``check --fix`` and the webhook size from,
  read by their parser (:func:`~shmguard.sources.loader.loader_request`); when it parses it is
  the loader.

Otherwise the loader is known only when both its workers and a batch shape are seen: a
batch size without a shape, or a shape without workers, says too little to predict from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from shmguard.estimate.dataloader import DEFAULT_PREFETCH_FACTOR, DTYPE_BYTES
from shmguard.estimate.decide import Need
from shmguard.estimate.plan import PlanRequest, make_plan
from shmguard.estimate.policy import Policy

#: The literals a line must hold to be read here (the matcher's cheap pre-filter).
LITERALS = (
    b"num_workers",
    b"num-workers",
    b"worker processes in total",
    b"prefetch_factor",
    b"prefetch-factor",
    b"nproc_per_node",
    b"nproc-per-node",
    b"torch.Size(",
    b"shmguard.io/dataloader",
)

_COUNTS = {
    "num_workers": re.compile(
        r"(?<![\w-])num[_-]workers[\"']?\s*[=:]?\s*[\"']?(\d{1,4})\b"
        r"|This DataLoader will create (\d{1,4}) worker processes in total"
    ),
    "prefetch_factor": re.compile(
        r"(?<![\w-])prefetch[_-]factor[\"']?\s*[=:]?\s*[\"']?(\d{1,4})\b"
    ),
    "local_ranks": re.compile(r"--nproc[_-]per[_-]node[= ](\d{1,4})\b"),
}
_SHAPE = re.compile(r"torch\.Size\(\[(\d+(?:,\s*\d+)+)\]\)")
_DTYPE = re.compile(r"dtype\s*=\s*torch\.(\w+)")
_ANNOTATION = re.compile(r"shmguard\.io/dataloader[\"']?\s*[:=]\s*[\"']?([\w=,.]+)")


@dataclass(frozen=True)
class Seen:
    """One parameter the inputs show: its value as read and where (input name, 1-based line)."""

    value: str
    file: str
    line: int

    def where(self) -> str:
        return f"{self.file} line {self.line}"


@dataclass
class LoaderSeen:
    """What the lines fed so far show of a DataLoader (:meth:`add` each line, then
    :meth:`request`). Bounded: one value per parameter."""

    found: dict[str, Seen] = field(default_factory=dict)
    shape: tuple[int, ...] = ()
    shape_seen: Seen | None = None

    def reset(self) -> None:
        """Forget every line (the next input is a new incident)."""
        self.found = {}
        self.shape = ()
        self.shape_seen = None

    def add(self, file: str, line: int, text: str) -> None:
        """Read one line of input ``file`` (1-based ``line``)."""
        for name, rx in _COUNTS.items():
            m = rx.search(text)
            if m is not None and name not in self.found:
                value = next(g for g in m.groups() if g is not None)
                self.found[name] = Seen(value, file, line)
        m = _ANNOTATION.search(text)
        if m is not None and "annotation" not in self.found:
            self.found["annotation"] = Seen(m.group(1), file, line)
        m = _DTYPE.search(text)
        if m is not None and m.group(1) in DTYPE_BYTES and "dtype" not in self.found:
            self.found["dtype"] = Seen(m.group(1), file, line)
        for m in _SHAPE.finditer(text):
            dims = tuple(int(d) for d in m.group(1).split(","))
            if all(d > 0 for d in dims) and _elements(dims) > _elements(self.shape):
                self.shape = dims
                self.shape_seen = Seen(m.group(0), file, line)

    def request(self) -> tuple[PlanRequest, str] | None:
        """``plan``'s request for the loader these lines show and one phrase saying what was
        read where (and what was assumed), or None when they show too little (module
        docstring)."""
        note = self.found.get("annotation")
        if note is not None:
            try:
                # imported here: the sources' detector stays out of every process that only
                # classifies logs (the tune trial child, the guard)
                from shmguard.sources.loader import loader_request

                return loader_request(note.value), f"shmguard.io/dataloader {note.value}"
            except ValueError:
                pass
        workers = self.found.get("num_workers")
        if workers is None or self.shape_seen is None:
            return None
        said = [f"num_workers {workers.value} ({workers.where()})"]
        said.append(f"batches of {self.shape_seen.value} ({self.shape_seen.where()})")
        dtype = self.found.get("dtype")
        said.append(
            f"dtype {dtype.value} ({dtype.where()})" if dtype else "float32 (plan's default dtype)"
        )
        pf = self.found.get("prefetch_factor")
        said.append(
            f"prefetch_factor {pf.value} ({pf.where()})"
            if pf
            else f"prefetch_factor {DEFAULT_PREFETCH_FACTOR} (PyTorch's default)"
        )
        ranks = self.found.get("local_ranks")
        if ranks is not None:
            said.append(f"{ranks.value} local ranks ({ranks.where()})")
        try:
            req = PlanRequest(
                int(workers.value),
                batch_size=self.shape[0],
                sample_shape=self.shape[1:],
                dtype=dtype.value if dtype else "float32",
                prefetch_factor=int(pf.value) if pf else DEFAULT_PREFETCH_FACTOR,
                local_ranks=max(1, int(ranks.value)) if ranks else 1,
            )
        except ValueError:
            return None
        return req, ", ".join(said)

    def gap(self) -> str:
        """What the lines show of a loader when :meth:`request` has none, as the words after
        "the log shows": ``no DataLoader parameters (num_workers and a batch's torch.Size)``,
        or the half that was seen and the half that was not."""
        workers = self.found.get("num_workers")
        if workers is not None and self.shape_seen is None:
            return f"num_workers {workers.value} ({workers.where()}) but no batch's torch.Size"
        if workers is None and self.shape_seen is not None:
            return f"a batch {self.shape_seen.value} ({self.shape_seen.where()}) but no num_workers"
        return "no DataLoader parameters (num_workers and a batch's torch.Size)"

    def need(self, policy: Policy | None = None) -> Need | None:
        """The DataLoader model's predicted peak for :meth:`request`'s loader (``plan``'s
        figure), as the size decision's ``model`` evidence; None when the lines show no
        loader, or one that uses no /dev/shm (``num_workers=0``) or that the model rejects."""
        seen = self.request()
        if seen is None:
            return None
        req, said = seen
        try:
            plan = make_plan(req, policy)
        except ValueError:  # PlanTooLarge too: no runtime takes such a size
            return None
        if plan.shm is None:
            return None
        return Need(
            plan.prediction.peak,
            "predicted peak",
            f"the DataLoader model (shmguard plan) for the loader the log shows: {said}",
        )


def _elements(dims: tuple[int, ...]) -> int:
    n = 1 if dims else 0
    for d in dims:
        n *= d
    return n
