"""Config sources of ``shmguard check``: files read with exact positions (internal for now).

Data flows sources -> rules -> edits (STYLE.md). Modules:

* :mod:`.text`, :mod:`.diagnostics`: bytes, decoding, char/byte offsets, per-file problems.
* :mod:`.yamlnode`, :mod:`.yamlload`: the YAML node layer (positions, paths, tags, merges).
* :mod:`.compose`, :mod:`.k8s` (+ :mod:`.k8s_kinds`, :mod:`.k8s_model`), :mod:`.jsonfiles`:
  Compose services, Kubernetes pod specs, ECS task definitions and daemon.json.
* :mod:`.shell`, :mod:`.runline` (+ :mod:`.runflags`), :mod:`.textsources`: ``docker|podman run``
  lines.
* :mod:`.workload`, :mod:`.detect`: PyTorch/NCCL/inference workload detection with evidence;
  :mod:`.workload_tokens` (the image tokens and command phrases, as data, each with its
  class) and :mod:`.tokenmatch` (matching them by token, and the same test as RE2 regular
  expressions for the generated policies).
* :mod:`.read`: the one bounded reader (the size cap, FIFOs, devices, standard input).
* :mod:`.discover`, :mod:`.exclude`, :mod:`.load`: which files (the walk, ``exclude``), and
  each loaded by content.
* :mod:`.gcpause`: the cyclic garbage collector paused while a file is loaded and checked.
"""
