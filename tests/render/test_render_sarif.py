"""SARIF 2.1.0 output: valid against the vendored OASIS schema, exact regions (1-based lines and
code-point columns, byte offsets into the file), levels, rules and fixes."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from shmguard.lint.check import FileResult, check_loaded
from shmguard.lint.config import RULES
from shmguard.model.finding import Finding, Location, Severity, apply_edits
from shmguard.render.sarif import SARIF_SCHEMA, sarif_log
from shmguard.sources.diagnostics import DiagnosticKind, SourceDiagnostic
from shmguard.sources.load import load_bytes, load_path

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = TESTS / "lint" / "config" / "fixtures"
SCHEMA = json.loads((TESTS / "fixtures" / "schemas" / "sarif-schema-2.1.0.json").read_text())


def validate(log: dict[str, object]) -> None:
    jsonschema.Draft4Validator.check_schema(SCHEMA)
    jsonschema.Draft4Validator(SCHEMA).validate(log)


def fixture_log() -> tuple[dict[str, object], dict[str, bytes]]:
    results, sources = [], {}
    for p in sorted(FIXTURES.iterdir()):
        lf = load_path(str(p))
        assert lf.src is not None
        results.append(check_loaded(lf))
        sources[lf.path] = lf.src.data
    return sarif_log(results, RULES, sources=sources), sources


def test_fixture_log_is_valid_sarif_with_every_rule() -> None:
    log, _ = fixture_log()
    validate(log)
    assert log["$schema"] == SARIF_SCHEMA and log["version"] == "2.1.0"
    (run,) = log["runs"]  # type: ignore[misc]
    driver = run["tool"]["driver"]
    assert [r["id"] for r in driver["rules"]] == [r.code for r in RULES]
    shm001 = driver["rules"][0]
    assert shm001["name"] == "ml-workload-without-shm-size"
    assert "helpUri" not in shm001  # no published docs URL to point at; help carries the doc
    assert shm001["defaultConfiguration"] == {"level": "warning"}
    assert shm001["help"]["markdown"].startswith("## SHM001 `ml-workload-without-shm-size`")
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["invocations"] == [{"executionSuccessful": True, "toolExecutionNotifications": []}]
    assert len(run["results"]) == 22  # SHM019 alone for train; SHM013 on the ipc donor
    for res in run["results"]:
        assert driver["rules"][res["ruleIndex"]]["id"] == res["ruleId"]


def test_first_compose_result_exact() -> None:
    log, _ = fixture_log()
    res = log["runs"][0]["results"][0]  # type: ignore[index]
    uri = res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == (FIXTURES / "compose_bad.yaml").as_uri()
    # train's size is only under build: SHM019 on the '8g', its fix the service's own line
    assert (res["ruleId"], res["level"]) == ("SHM019", "warning")
    assert res["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 8,
        "startColumn": 17,
        "endLine": 8,
        "endColumn": 21,
        "byteOffset": 191,
        "byteLength": 4,
    }
    assert res["locations"][0]["logicalLocations"] == [
        {"fullyQualifiedName": "services.train.build.shm_size", "kind": "element"}
    ]
    assert res["fixes"][0]["description"] == {"text": 'Add shm_size: "8g" to the service'}
    assert res["fixes"][0]["properties"] == {"applicability": "safe"}
    assert res["fixes"][0]["artifactChanges"][0]["replacements"] == [
        {
            "deletedRegion": {"byteOffset": 49, "byteLength": 0},
            "insertedContent": {"text": '    shm_size: "8g"\n'},
        }
    ]
    assert len(res["partialFingerprints"]["shmguard/v1"]) == 16


def test_byte_offsets_and_columns_on_non_ascii_lines() -> None:
    text = 'echo "café ☕" && docker run --shm-size=2Gi nginx\n'
    data = text.encode()
    result = check_loaded(load_bytes(data, "run.sh"))
    log = sarif_log([result], RULES, sources={"run.sh": data})
    validate(log)
    (res,) = log["runs"][0]["results"]
    region = res["locations"][0]["physicalLocation"]["region"]
    flagged = data[region["byteOffset"] : region["byteOffset"] + region["byteLength"]]
    assert flagged == b"--shm-size=2Gi"
    # columns count code points: 'é' and '☕' are one column each but 2 and 3 bytes
    assert text.index("--shm-size") == 28
    assert region == {
        "startLine": 1,
        "startColumn": 29,
        "endLine": 1,
        "endColumn": 43,
        "byteOffset": 31,
        "byteLength": 14,
    }
    # the fix's replacements, applied to the bytes, give the fixed line
    (fix,) = res["fixes"]
    (change,) = fix["artifactChanges"]
    out = data
    for rep in sorted(change["replacements"], key=lambda r: -r["deletedRegion"]["byteOffset"]):
        start = rep["deletedRegion"]["byteOffset"]
        end = start + rep["deletedRegion"]["byteLength"]
        out = out[:start] + rep["insertedContent"]["text"].encode() + out[end:]
    finding = result.findings[0]
    assert finding.fix is not None
    assert out == apply_edits(data, finding.fix.edits)
    assert out.decode() == text.replace("2Gi", "2g")


def test_levels_uris_display_only_fixes_and_notifications() -> None:
    info = Finding("SHM002", "kubernetes-suffix-in-docker-size", Severity.INFO, "m", None,
                   Location("/abs/dir/a b.yaml", 1, 1, 1, 2))  # fmt: skip
    result = FileResult("/abs/dir/a b.yaml", "compose", (info,), ())
    broken = FileResult(
        "bad.yaml",
        "error",
        (),
        (
            SourceDiagnostic(
                "bad.yaml", 2, 5, "mapping values are not allowed", DiagnosticKind.INVALID_YAML
            ),
        ),
    )
    log = sarif_log([result, broken], RULES)
    validate(log)
    run = log["runs"][0]
    (res,) = run["results"]
    assert res["level"] == "note" and "fixes" not in res and "partialFingerprints" not in res
    assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == (
        "file:///abs/dir/a%20b.yaml"
    )
    assert run["invocations"] == [
        {
            "executionSuccessful": False,
            "toolExecutionNotifications": [
                {
                    "level": "error",
                    "message": {"text": "invalid-yaml: mapping values are not allowed"},
                    "locations": [
                        {
                            "physicalLocation": {
                                "artifactLocation": {"uri": "bad.yaml"},
                                "region": {"startLine": 2, "startColumn": 5, "endLine": 2},
                            }
                        }
                    ],
                }
            ],
        }
    ]
