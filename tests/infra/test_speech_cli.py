"""``speech-infra``: the exact CDK calls (a recorder stands in for cdk), the upload between them, the
missing-prerequisite messages and what ``destroy`` says it leaves behind."""

from __future__ import annotations

import os
import shlex
import sys

import pytest
from infra_fakes import ACCOUNT, REGION, add_stack, endpoint_response

from infra import model_sync
from infra.cli import speech_main
from infra.settings import REPO_ROOT
from reference_server import assets as server_assets

APP = f"{shlex.quote(sys.executable)} -m infra.app"
GLOBAL = ["--app", APP, "--output", str(REPO_ROOT / "cdk.out")]
BOOTSTRAP = "/cdk-bootstrap/hnb659fds/version"


@pytest.fixture
def assets(tmp_path, monkeypatch):
    """A stand-in assets cache that reference_server.assets.locate vouches for."""
    root = tmp_path / "assets"
    root.mkdir()
    names = ("kokoro-v1.0.int8.onnx", "voices-v1.0.bin", "kokoro-v1_0.from-onnx.pth")
    for name in names:
        (root / name).write_bytes(name.encode())
    located = server_assets.Assets(
        root, root / names[0], root / names[1], server_assets.CONFIG_PATH, torch_weights=root / names[2]
    )

    def locate(directory):
        if directory != root:
            raise server_assets.AssetError(f"no assets in {directory}")
        return located

    monkeypatch.setattr(server_assets, "locate", locate)
    return root


UPLOADED = ("kokoro-v1.0.int8.onnx", "kokoro-v1_0.from-onnx.pth", "voices-v1.0.bin")


def _bootstrapped(stubbed):
    stubbed.stub("ssm").add_response(
        "get_parameter",
        {"Parameter": {"Name": BOOTSTRAP, "Value": "30", "Type": "String"}},
        {"Name": BOOTSTRAP},
    )


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["deploy", "--help"], ["destroy", "--help"], ["list", "--help"], ["status", "--help"]],
)
def test_help_everywhere(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        speech_main(argv)
    assert exit_.value.code == 0
    assert "usage: speech-infra" in capsys.readouterr().out


def test_list_needs_no_aws(capsys):
    assert speech_main(["list"]) == 0
    out = capsys.readouterr().out
    assert "kokoro-82m:" in out
    assert "Kokoro82mModelCache, Kokoro82mFoundation, Kokoro82mEndpoint" in out
    assert "ml.g5.xlarge" in out


def test_deploy_and_destroy_need_a_model_or_all(capsys):
    for verb in ("deploy", "destroy"):
        with pytest.raises(SystemExit) as exit_:
            speech_main([verb])
        assert exit_.value.code == 2
    with pytest.raises(SystemExit):
        speech_main(["deploy", "kokoro-82m", "--all"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_deploy_runs_two_cdk_steps_around_the_upload(fake_tools, stubbed_aws, assets, capsys):
    version = model_sync.verified_assets(assets).version
    prefix = f"kokoro-82m/{version}/"
    _bootstrapped(stubbed_aws)
    add_stack(stubbed_aws, "Kokoro82mModelCache", {"BucketName": "models-bucket"})
    s3 = stubbed_aws.stub("s3")
    uploads = []
    stubbed_aws.account.clients["s3"].meta.events.register(
        "provide-client-params.s3.PutObject",
        lambda params, **_: uploads.append((params["Key"], len(fake_tools.calls()))),
    )
    for name in UPLOADED:
        s3.add_client_error(
            "head_object",
            service_error_code="404",
            http_status_code=404,
            expected_params={"Bucket": "models-bucket", "Key": prefix + name},
        )
        s3.add_response("put_object", {"ETag": '"e"'})

    status = speech_main(
        [
            "deploy",
            "kokoro-82m",
            "--assets-dir",
            str(assets),
            "--instance-type",
            "ml.g6.xlarge",
            "--max-instances",
            "4",
            "--profile",
            "prod",
            "--region",
            REGION,
            "--yes",
        ]
    )

    assert status == 0
    stubbed_aws.assert_done()
    assert stubbed_aws.connected_with == [("prod", REGION)]
    context = [
        "--context",
        "kokoro-82m.instance_type=ml.g6.xlarge",
        "--context",
        "kokoro-82m.max_instances=4",
        "--context",
        f"kokoro-82m.model_data_version={version}",
    ]
    approval = ["--exclusively", "--require-approval", "never"]
    calls = fake_tools.calls()
    assert [call["argv"] for call in calls] == [
        [
            *GLOBAL,
            "--profile",
            "prod",
            *context,
            "deploy",
            *approval,
            "Kokoro82mModelCache",
            "Kokoro82mFoundation",
        ],
        [*GLOBAL, "--profile", "prod", *context, "deploy", *approval, "Kokoro82mEndpoint"],
    ]
    # The weights went up after the bucket existed and before the endpoint was created.
    assert uploads == [(prefix + name, 1) for name in UPLOADED]
    expected_env = {**os.environ, "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION}
    for call in calls:
        assert call["env"] == expected_env
        assert call["cwd"] == str(REPO_ROOT)
    err = capsys.readouterr().err
    assert "SageMaker bills every instance-hour" in err
    assert f"weights at s3://models-bucket/{prefix}: 3 uploaded, 0 already there" in err


def test_deploy_without_flags_passes_only_the_weights_version(fake_tools, stubbed_aws, assets, capsys):
    version = model_sync.verified_assets(assets).version
    _bootstrapped(stubbed_aws)
    add_stack(stubbed_aws, "Kokoro82mModelCache", {"BucketName": "b"})
    for _ in UPLOADED:
        stubbed_aws.stub("s3").add_response("head_object", {"ContentLength": 0, "Metadata": {}})
        stubbed_aws.stub("s3").add_response("put_object", {})
    assert speech_main(["deploy", "--all", "--assets-dir", str(assets)]) == 0
    first, second = (call["argv"] for call in fake_tools.calls())
    context = ["--context", f"kokoro-82m.model_data_version={version}"]
    assert first == [
        *GLOBAL,
        *context,
        "deploy",
        "--exclusively",
        "Kokoro82mModelCache",
        "Kokoro82mFoundation",
    ]
    assert second == [*GLOBAL, *context, "deploy", "--exclusively", "Kokoro82mEndpoint"]
    assert fake_tools.calls()[0]["env"] == dict(os.environ)


def test_deploy_uses_npx_when_cdk_is_not_installed(fake_tools, stubbed_aws, assets):
    fake_tools.remove("cdk")
    fake_tools.add_recorder("npx")
    _bootstrapped(stubbed_aws)
    add_stack(stubbed_aws, "Kokoro82mModelCache", {"BucketName": "b"})
    for _ in UPLOADED:
        stubbed_aws.stub("s3").add_response("head_object", {"ContentLength": 0, "Metadata": {}})
        stubbed_aws.stub("s3").add_response("put_object", {})
    assert speech_main(["deploy", "kokoro-82m", "--assets-dir", str(assets)]) == 0
    assert [call["argv"][:4] for call in fake_tools.calls()] == [["--yes", "aws-cdk@2", "--app", APP]] * 2


def test_deploy_stops_when_the_first_cdk_step_fails(fake_tools, stubbed_aws, assets, monkeypatch):
    monkeypatch.setenv("CDK_RECORDER_EXIT", "3")
    _bootstrapped(stubbed_aws)
    assert speech_main(["deploy", "kokoro-82m", "--assets-dir", str(assets)]) == 3
    assert len(fake_tools.calls()) == 1
    stubbed_aws.assert_done()  # no bucket look-up, no upload


def test_deploy_with_nothing_installed_lists_every_missing_piece(fake_tools, no_aws_config, tmp_path, capsys):
    for tool in ("cdk", "node", "docker"):
        fake_tools.remove(tool)
    status = speech_main(["deploy", "kokoro-82m", "--assets-dir", str(tmp_path / "nowhere")])
    assert status == 2
    assert fake_tools.calls() == []
    err = capsys.readouterr().err
    for missing, remedy in [
        ("the AWS CDK command-line tool (cdk)", "npm install -g aws-cdk"),
        ("Node.js (node)", "https://nodejs.org"),
        ("Docker (docker)", "https://docs.docker.com/get-docker/"),
        ("the verified model assets", "run: python -m reference_server.assets fetch --dir"),
        ("AWS credentials", "aws configure"),
        ("an AWS Region", "--region"),
    ]:
        assert f"speech-infra: missing: {missing}" in err
        assert remedy in err
    assert "stopped before changing anything in AWS" in err


def test_deploy_into_an_unbootstrapped_account(fake_tools, stubbed_aws, assets, capsys):
    stubbed_aws.stub("ssm").add_client_error("get_parameter", service_error_code="ParameterNotFound")
    assert speech_main(["deploy", "kokoro-82m", "--assets-dir", str(assets)]) == 2
    assert f"cdk bootstrap aws://{ACCOUNT}/{REGION}" in capsys.readouterr().err
    assert fake_tools.calls() == []


def test_deploy_rejects_bad_settings_before_anything_else(fake_tools, capsys):
    assert speech_main(["deploy", "kokoro-82m", "--min-instances", "3", "--max-instances", "2"]) == 2
    assert "kokoro-82m.max_instances (2) must be >= kokoro-82m.min_instances (3)" in capsys.readouterr().err
    assert speech_main(["deploy", "kokoro-82m", "--instance-type", "g5.xlarge"]) == 2
    assert fake_tools.calls() == []


def test_destroy_says_what_it_leaves_and_how_to_remove_it(fake_tools, stubbed_aws, capsys):
    add_stack(stubbed_aws, "Kokoro82mModelCache", {"BucketName": "kokoro82mmodelcache-modelbucket-x1"})
    add_stack(
        stubbed_aws,
        "Kokoro82mEndpoint",
        {
            "EndpointName": "tts-prod",
            "ImageRepository": "cdk-hnb659fds-container-assets-r",
            "ImageTag": "abc123",
        },
    )
    assert speech_main(["destroy", "kokoro-82m", "--yes", "--profile", "prod"]) == 0
    stubbed_aws.assert_done()
    (call,) = fake_tools.calls()
    assert call["argv"] == [
        *GLOBAL,
        "--profile",
        "prod",
        "destroy",
        "--force",
        "Kokoro82mModelCache",
        "Kokoro82mFoundation",
        "Kokoro82mEndpoint",
    ]
    out = capsys.readouterr().out
    flags = f"--region {REGION} --profile prod"
    assert f"aws s3 rb s3://kokoro82mmodelcache-modelbucket-x1 --force {flags}" in out
    assert (
        "aws ecr batch-delete-image --repository-name cdk-hnb659fds-container-assets-r "
        f"--image-ids imageTag=abc123 {flags}"
    ) in out
    assert "delete the image, never the repository" in out
    assert "--log-group-name-prefix /aws/sagemaker/Endpoints/tts-prod" in out


def test_destroy_of_stacks_never_deployed_still_names_where_to_look(fake_tools, stubbed_aws, capsys):
    add_stack(stubbed_aws, "Kokoro82mModelCache", None)
    add_stack(stubbed_aws, "Kokoro82mEndpoint", None)
    assert speech_main(["destroy", "--all"]) == 0
    assert fake_tools.calls()[0]["argv"][-4:] == [
        "destroy",
        "Kokoro82mModelCache",
        "Kokoro82mFoundation",
        "Kokoro82mEndpoint",
    ]
    out = capsys.readouterr().out
    assert f"grep kokoro82mmodelcache-  # then: aws s3 rb s3://NAME --force --region {REGION}" in out
    assert f"aws ecr list-images --repository-name cdk-hnb659fds-container-assets-{ACCOUNT}-{REGION}" in out
    assert "/aws/sagemaker/Endpoints/kokoro-82m" in out


def test_destroy_that_fails_or_is_declined_prints_no_leftovers(fake_tools, stubbed_aws, monkeypatch, capsys):
    monkeypatch.setenv("CDK_RECORDER_EXIT", "1")
    add_stack(stubbed_aws, "Kokoro82mModelCache", None)
    add_stack(stubbed_aws, "Kokoro82mEndpoint", None)
    assert speech_main(["destroy", "kokoro-82m"]) == 1
    assert "left behind" not in capsys.readouterr().out


def test_destroy_needs_cdk_node_and_credentials_but_not_docker(fake_tools, no_aws_config, capsys):
    fake_tools.remove("docker")
    fake_tools.remove("cdk")
    assert speech_main(["destroy", "kokoro-82m"]) == 2
    err = capsys.readouterr().err
    assert "missing: the AWS CDK command-line tool (cdk)" in err
    assert "missing: AWS credentials" in err
    assert "Docker" not in err


def test_status_reports_stacks_and_endpoint(stubbed_aws, capsys):
    add_stack(stubbed_aws, "Kokoro82mModelCache", {"BucketName": "b"})
    add_stack(stubbed_aws, "Kokoro82mFoundation", {})
    add_stack(
        stubbed_aws,
        "Kokoro82mEndpoint",
        {"EndpointName": "tts-prod", "ModelDataUrl": "s3://b/kokoro-82m/v/"},
        status="UPDATE_IN_PROGRESS",
    )
    stubbed_aws.stub("sagemaker").add_response(
        "describe_endpoint", endpoint_response("tts-prod", "Updating", 2), {"EndpointName": "tts-prod"}
    )
    assert speech_main(["status"]) == 0
    out = capsys.readouterr().out
    assert "stack Kokoro82mFoundation: CREATE_COMPLETE" in out
    assert "stack Kokoro82mEndpoint: UPDATE_IN_PROGRESS" in out
    assert "endpoint tts-prod: Updating" in out
    assert "variant AllTraffic: 2 instances (desired 2)" in out
    assert "weights: s3://b/kokoro-82m/v/" in out


def test_status_of_nothing_deployed(stubbed_aws, capsys):
    for name in ("Kokoro82mModelCache", "Kokoro82mFoundation", "Kokoro82mEndpoint"):
        add_stack(stubbed_aws, name, None)
    stubbed_aws.stub("sagemaker").add_client_error(
        "describe_endpoint", service_error_code="ValidationException"
    )
    assert speech_main(["status", "kokoro-82m"]) == 0
    out = capsys.readouterr().out
    assert out.count("not deployed") == 4
