"""spec/asyncapi.json is the generated document, built from spec/schemas, and valid AsyncAPI 3.0.

Validity is judged by AsyncAPI's own JSON Schema from the npm package @asyncapi/specs (pinned, fetched with
npm pack and checked against its sha512 by protocol.asyncapi.meta_schema), never by a copy of ours.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from protocol import asyncapi, schemas


@pytest.fixture(scope="module")
def meta_schema():
    return asyncapi.meta_schema()


def test_the_checked_in_document_is_the_generated_one():
    assert asyncapi.DOCUMENT.read_text(encoding="utf-8") == asyncapi.render(asyncapi.build_document()), (
        "spec/asyncapi.json is stale: run python -m protocol.asyncapi"
    )


def test_it_is_valid_asyncapi_3(meta_schema):
    document = json.loads(asyncapi.DOCUMENT.read_text(encoding="utf-8"))
    assert document["asyncapi"] == "3.0.0"
    assert meta_schema["$id"] == "http://asyncapi.com/definitions/3.0.0/asyncapi.json"
    assert asyncapi.validate(document, meta_schema) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("operations", "invoke", "action"), "answer"),  # send or receive only
        (("channels", "session", "address"), 7),
        (("info",), {"title": "no version"}),
        (("components", "messages", "cancel", "payload"), {"schemaFormat": 3, "schema": {}}),
    ],
)
def test_the_validation_has_teeth(meta_schema, path, value):
    document = copy.deepcopy(asyncapi.build_document())
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert asyncapi.validate(document, meta_schema), f"{path} = {value!r} passed"


def test_every_schema_file_is_a_payload_as_it_lies_on_disk():
    document = asyncapi.build_document()
    components = document["components"]["schemas"]
    assert set(components) == set(schemas.names())
    for name in schemas.names():
        assert components[name] == {"schemaFormat": asyncapi.SCHEMA_FORMAT, "schema": schemas.load(name)}
        assert document["components"]["messages"][name]["payload"] == {"$ref": f"#/components/schemas/{name}"}


def test_every_reference_resolves_and_operations_use_their_channels_messages():
    document = asyncapi.build_document()

    def resolve(ref: str):
        assert ref.startswith("#/"), ref
        node = document
        for key in ref[2:].split("/"):
            node = node[key]
        return node

    def refs(node):
        if isinstance(node, dict):
            if "$ref" in node:
                yield node["$ref"]
            for value in node.values():
                yield from refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    outside_payloads = {k: v for k, v in document.items() if k != "components"}
    for ref in refs(outside_payloads):
        resolve(ref)
    for message in document["components"]["messages"].values():
        if "$ref" in message["payload"]:
            resolve(message["payload"]["$ref"])
    for name, operation in document["operations"].items():
        channel = operation["channel"]["$ref"]
        for message in [*operation.get("messages", []), *operation.get("reply", {}).get("messages", [])]:
            assert message["$ref"].startswith(channel + "/messages/"), (name, message)


def test_a_schema_on_no_channel_is_refused(monkeypatch):
    monkeypatch.setattr(asyncapi, "AGENT_OUT", asyncapi.AGENT_OUT[:-1])
    with pytest.raises(ValueError, match="agent_error"):
        asyncapi.build_document()


def test_the_command_checks_a_stale_file(tmp_path):
    stale = tmp_path / "asyncapi.json"
    stale.write_text("{}\n", encoding="utf-8")
    command = [sys.executable, "-m", "protocol.asyncapi", "--check", "--output", str(stale)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "stale" in done.stderr
    subprocess.run(
        [sys.executable, "-m", "protocol.asyncapi", "--output", str(stale)], check=True, timeout=60
    )
    assert subprocess.run(command, capture_output=True, timeout=60).returncode == 0
    bad = subprocess.run(
        [sys.executable, "-m", "protocol.asyncapi", "--chek"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
