"""Which YAML files are unrendered templates (skipped with an info line) and which hold
template text as data (read): src/shmguard/sources/yamlload.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shmguard.sources.diagnostics import DiagnosticKind
from shmguard.sources.yamlload import load_yaml

#: Helm / Go templates: each is skipped, the diagnostic at the first template action that is
#: not inside a value.
TEMPLATES = {
    "a .Values reference": (b"replicas: {{ .Values.replicas }}\n", (1, 11)),
    "a flow mapping made of braces": (b"replicas: {{ n }}\n", (1, 11)),
    "an if action on its own line": (b"a: 1\n{{- if .Values.x }}\nb: 2\n{{- end }}\n", (2, 1)),
    "include with nindent": (
        b'metadata:\n  labels:\n    {{- include "c.labels" . | nindent 4 }}\n',
        (3, 5),
    ),
    "a quoted .Release reference": (b'name: "{{ .Release.Name }}-w"\n', (1, 8)),
    "a template that breaks YAML": (b"a: {{ x }}-y\n", (1, 4)),
    "a Jinja statement that breaks YAML": (b"{% if gpu %}\na: 1\n{% endif %}\n", (1, 1)),
}

#: Template text inside values or comments: data, the file is read.
DATA = {
    "a Jinja chat template in a block scalar": (
        b"kind: ConfigMap\ndata:\n  t.jinja: |\n    {{- bos_token }}\n"
        b"    {%- if tools is defined %}{{- tools }}{%- endif %}\n"
    ),
    "a Jinja trim marker in a quoted value": b't: "{{- bos_token }}"\n',
    "an Argo parameter": b"args: ['{{inputs.parameters.x}}']\n",
    "a GitHub expression": b"runs-on: ${{ matrix.os }}\n",
    "a comment line": b"# rendered from {{ x }} upstream\na: 1\n",
    "a trailing comment": b"a: 1  # {{ x }}\n",
    "a plain value": b"a: foo-{{ x }}\n",
}


@pytest.mark.parametrize("name", TEMPLATES)
def test_templates_are_skipped(name: str) -> None:
    data, where = TEMPLATES[name]
    yf = load_yaml(data)
    assert yf.documents == ()
    (d,) = yf.diagnostics
    assert d.kind is DiagnosticKind.TEMPLATE and d.info
    assert (d.line, d.column) == where


@pytest.mark.parametrize("name", DATA)
def test_template_text_in_values_is_data(name: str) -> None:
    yf = load_yaml(DATA[name])
    assert yf.diagnostics == ()
    assert len(yf.documents) == 1 and yf.documents[0].root is not None


def test_a_manifest_with_a_chat_template_configmap_is_checked(tmp_path: Path) -> None:
    # Before: the ConfigMap's `{{-` made the whole file a "Helm template", so the vLLM
    # Deployment beside it (an unsized memory /dev/shm sized to its 10Gi limit) had no finding.
    deploy = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: vllm\nspec:\n  template:\n"
        "    spec:\n      containers:\n      - name: server\n"
        "        image: vllm/vllm-openai:v0.6.0\n"
        "        resources:\n          limits:\n            memory: 10Gi\n"
        '            nvidia.com/gpu: "1"\n'
        "        volumeMounts:\n        - mountPath: /dev/shm\n          name: dshm\n"
        "      volumes:\n      - name: dshm\n        emptyDir:\n          medium: Memory\n"
    )
    cm = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: chat\ndata:\n"
        "  llama.jinja: |\n    {{- bos_token }}\n    {%- if messages %}{{- 'x' }}{%- endif %}\n"
    )
    path = tmp_path / "vllm.yaml"
    path.write_text(deploy + "---\n" + cm)
    helm = tmp_path / "chart.yaml"
    helm.write_text(deploy.replace("memory: 10Gi", "memory: {{ .Values.memory }}"))
    r = subprocess.run(
        [sys.executable, "-m", "shmguard", "check", "--format", "json", str(path), str(helm)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    files = {Path(f["file"]).name: f for f in json.loads(r.stdout)["files"]}
    assert [f["code"] for f in files["vllm.yaml"]["findings"]] == ["SHM010"]
    assert files["vllm.yaml"]["diagnostics"] == []
    assert files["chart.yaml"]["findings"] == []
    assert [d["kind"] for d in files["chart.yaml"]["diagnostics"]] == ["unrendered-template"]
