"""``speech-infra``: deploy, tear down, list and inspect the speech endpoint of each catalogued model.

    speech-infra deploy  kokoro-82m | --all  [--instance-type T] [--min-instances N] ...
    speech-infra destroy kokoro-82m | --all  [--yes]
    speech-infra list
    speech-infra status  [kokoro-82m | --all]

``deploy`` runs in two CDK steps around the weights upload: the model bucket and the endpoint role
first, then (after infra.model_sync has put the weights into the bucket) the endpoint stack, which
points at exactly the uploaded version. Exit status: 0 done, 2 a prerequisite or setting is missing
or wrong (nothing was changed), otherwise the failing CDK call's status (or 1).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from infra import account as aws
from infra import model_sync
from infra.cdk_tool import CdkTool, aws_options
from infra.leftovers import aws_flags, bucket_leftover, image_leftover, log_group_leftover, print_leftovers
from infra.preflight import EXIT_MISSING, Problem, check_docker, check_node, find_cdk, report
from infra.settings import MODELS, ModelSpec, SettingsError, SpeechSettings

TOOL = "speech-infra"

# CLI flag (argparse dest) -> SpeechSettings field; each given flag becomes `<model>.<field>` context.
_SETTING_FLAGS = (
    "endpoint_name",
    "instance_type",
    "min_instances",
    "max_instances",
    "target_gpu_utilization",
    "scaling_metric",
    "target_concurrency",
)


def build_parser() -> argparse.ArgumentParser:
    """The ``speech-infra`` argument parser (one subcommand per verb)."""
    parser = argparse.ArgumentParser(
        prog=TOOL,
        description="Deploy the Kokoro-82M reference server to a SageMaker endpoint with bidirectional "
        "streaming, and tear it down. Runs the AWS CDK tool on infra/app.py; see infra/README.md.",
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="{deploy,destroy,list,status}")
    aws = aws_options()

    deploy = verbs.add_parser(
        "deploy",
        parents=[aws],
        help="upload the weights and deploy the endpoint (billed per instance-hour until destroyed)",
        description="Deploy a model: its bucket and role, the weights upload, then the endpoint with "
        "autoscaling. Settings not given take their defaults (infra/README.md, Settings).",
    )
    _add_target(deploy, required=True)
    settings = deploy.add_argument_group("endpoint settings")
    settings.add_argument("--endpoint-name", help="SageMaker endpoint name (default: the model key)")
    settings.add_argument("--instance-type", help="SageMaker instance type (default: ml.g5.xlarge)")
    settings.add_argument("--min-instances", type=int, help="autoscaling minimum, >= 1 (default: 1)")
    settings.add_argument("--max-instances", type=int, help="autoscaling maximum (default: 2)")
    settings.add_argument(
        "--scaling-metric",
        choices=("concurrency", "gpu-utilization"),
        help="what autoscaling holds: streams open per instance (default) or GPU utilization",
    )
    settings.add_argument(
        "--target-concurrency",
        type=float,
        help="streams open per instance autoscaling holds: the capacity figure of `python -m bench run "
        "capacity` on the instance kind (default: 4)",
    )
    settings.add_argument(
        "--target-gpu-utilization",
        type=float,
        help="percent GPU utilization autoscaling holds with --scaling-metric gpu-utilization (default: 60)",
    )
    deploy.add_argument(
        "--assets-dir",
        type=Path,
        default=None,
        help="folder of the verified model assets (default: $KOKORO_ASSETS_DIR or ~/.cache/kokoro-bidi-tts)",
    )
    deploy.add_argument("--yes", action="store_true", help="do not ask to approve IAM changes")

    destroy = verbs.add_parser(
        "destroy",
        parents=[aws],
        help="delete the endpoint, role and stacks; print what is left and how to remove it",
        description="Delete a model's stacks. The model bucket, the server image and the endpoint's "
        "log group stay; the command prints their names and the commands that remove them.",
    )
    _add_target(destroy, required=True)
    destroy.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    verbs.add_parser("list", help="list the deployable models and their stacks (no AWS access)")

    status = verbs.add_parser("status", parents=[aws], help="show stacks and endpoint state")
    _add_target(status, required=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``speech-infra``; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.verb == "list":
        return _list()
    models = _selected(args)
    if args.verb == "deploy":
        return _deploy(args, models)
    if args.verb == "destroy":
        return _destroy(args, models)
    return _status(args, models)


def _add_target(parser: argparse.ArgumentParser, *, required: bool) -> None:
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("model", nargs="?", choices=sorted(MODELS), help="catalogue key of the model")
    group.add_argument("--all", action="store_true", help="every model in the catalogue")


def _selected(args: argparse.Namespace) -> list[ModelSpec]:
    if args.model:
        return [MODELS[args.model]]
    return list(MODELS.values())


def _list() -> int:
    for model in MODELS.values():
        defaults = SpeechSettings(model=model, endpoint_name=model.default_endpoint_name)
        print(f"{model.key}: {model.description}")
        print(f"  stacks: {', '.join(model.stacks)}")
        print(
            f"  endpoint: {defaults.endpoint_name} on {defaults.min_instances}-{defaults.max_instances} x "
            f"{defaults.instance_type} (defaults)"
        )
    return 0


def _context(args: argparse.Namespace, model: ModelSpec, version: str) -> dict[str, str]:
    """The CDK context of one model's deployment: the flags given, and the weights version."""
    context = {}
    for name in _SETTING_FLAGS:
        value = getattr(args, name)
        if value is not None:
            context[f"{model.key}.{name}"] = str(value)
    context[f"{model.key}.model_data_version"] = version
    return context


def _deploy(args: argparse.Namespace, models: list[ModelSpec]) -> int:
    if args.endpoint_name and len(models) > 1:
        print(f"{TOOL}: --endpoint-name names one endpoint; give one model, not --all", file=sys.stderr)
        return EXIT_MISSING
    overrides = {name: getattr(args, name) for name in _SETTING_FLAGS if getattr(args, name) is not None}
    try:
        settings = {m.key: SpeechSettings.from_context(m, lambda _key: None, **overrides) for m in models}
    except SettingsError as error:
        print(f"{TOOL}: {error}", file=sys.stderr)
        return EXIT_MISSING

    command, problems = find_cdk()
    problems += check_node() + check_docker()
    manifest = None
    try:
        manifest = model_sync.verified_assets(args.assets_dir)
    except model_sync.AssetsNotReady as error:
        problems.append(Problem("the verified model assets", str(error)))
    account, aws_problems = aws.connect(args.profile, args.region)
    problems += aws_problems
    if account is not None:
        problems += aws.check_bootstrap(account)
    if problems:
        report(problems, tool=TOOL)
        return EXIT_MISSING
    assert command is not None and manifest is not None and account is not None

    cdk = CdkTool(command, profile=args.profile, region=args.region)
    approval = ["--require-approval", "never"] if args.yes else []
    for model in models:
        chosen = settings[model.key]
        print(
            f"{TOOL}: deploying {model.key} to {account.account_id}/{account.region}: endpoint "
            f"{chosen.endpoint_name} on {chosen.min_instances}-{chosen.max_instances} x "
            f"{chosen.instance_type}. SageMaker bills every instance-hour until "
            f"`{TOOL} destroy {model.key}`.",
            file=sys.stderr,
        )
        context = _context(args, model, manifest.version)
        status = cdk.run(
            "deploy",
            [model.model_cache_stack, model.foundation_stack],
            context=context,
            options=["--exclusively", *approval],
        )
        if status != 0:
            return status
        cache = aws.describe_stack(account, model.model_cache_stack)
        bucket = cache.outputs.get("BucketName") if cache else None
        if not bucket:
            print(f"{TOOL}: stack {model.model_cache_stack} reports no BucketName output", file=sys.stderr)
            return 1
        prefix = model_sync.model_data_prefix(model, manifest.version)
        uploaded = model_sync.upload_assets(
            account.client("s3"),
            manifest,
            bucket=bucket,
            prefix=prefix,
            log=lambda line: print(f"{TOOL}: {line}", file=sys.stderr),
        )
        print(
            f"{TOOL}: weights at s3://{bucket}/{prefix}: {len(uploaded.uploaded)} uploaded, "
            f"{len(uploaded.skipped)} already there",
            file=sys.stderr,
        )
        status = cdk.run(
            "deploy", [model.endpoint_stack], context=context, options=["--exclusively", *approval]
        )
        if status != 0:
            return status
        print(
            f"{TOOL}: endpoint {chosen.endpoint_name} deployed; `{TOOL} status {model.key}` shows its state."
        )
    return 0


def _destroy(args: argparse.Namespace, models: list[ModelSpec]) -> int:
    command, problems = find_cdk()
    problems += check_node()
    account, aws_problems = aws.connect(args.profile, args.region)
    problems += aws_problems
    if problems:
        report(problems, tool=TOOL)
        return EXIT_MISSING
    assert command is not None and account is not None

    cdk = CdkTool(command, profile=args.profile, region=args.region)
    flags = aws_flags(account.region, args.profile)
    for model in models:
        # Read the names of what will be left before the stacks (and their outputs) are gone.
        cache = aws.describe_stack(account, model.model_cache_stack)
        endpoint = aws.describe_stack(account, model.endpoint_stack)
        endpoint_outputs = endpoint.outputs if endpoint else {}
        endpoint_name = endpoint_outputs.get("EndpointName", model.default_endpoint_name)
        status = cdk.run("destroy", list(model.stacks), options=["--force"] if args.yes else [])
        if status != 0:
            return status
        print_leftovers(
            [
                bucket_leftover(
                    cache.outputs.get("BucketName") if cache else None,
                    stack_name=model.model_cache_stack,
                    flags=flags,
                ),
                image_leftover(
                    endpoint_outputs.get("ImageRepository"),
                    endpoint_outputs.get("ImageTag"),
                    account_id=account.account_id,
                    region=account.region,
                    flags=flags,
                ),
                log_group_leftover(
                    f"/aws/sagemaker/Endpoints/{endpoint_name}", writer="SageMaker", flags=flags
                ),
            ],
            tool=TOOL,
        )
    return 0


def _status(args: argparse.Namespace, models: list[ModelSpec]) -> int:
    account, problems = aws.connect(args.profile, args.region)
    if account is None:
        report(problems, tool=TOOL)
        return EXIT_MISSING
    for model in models:
        print(f"{model.key} in {account.account_id}/{account.region}:")
        endpoint_stack = None
        for name in model.stacks:
            state = aws.describe_stack(account, name)
            print(f"  stack {name}: {state.status if state else 'not deployed'}")
            if name == model.endpoint_stack:
                endpoint_stack = state
        outputs = endpoint_stack.outputs if endpoint_stack else {}
        endpoint_name = outputs.get("EndpointName", model.default_endpoint_name)
        endpoint = aws.describe_endpoint(account, endpoint_name)
        if endpoint is None:
            print(f"  endpoint {endpoint_name}: not deployed")
            continue
        print(f"  endpoint {endpoint_name}: {endpoint['EndpointStatus']}")
        if endpoint.get("FailureReason"):
            print(f"    failure: {endpoint['FailureReason']}")
        for variant in endpoint.get("ProductionVariants", []):
            print(
                f"    variant {variant['VariantName']}: {variant.get('CurrentInstanceCount', '?')} instances "
                f"(desired {variant.get('DesiredInstanceCount', '?')})"
            )
        if "ModelDataUrl" in outputs:
            print(f"  weights: {outputs['ModelDataUrl']}")
    return 0
