"""``agent-infra``: deploy, diff, tear down and inspect the reference agent on AgentCore Runtime.

    agent-infra deploy  --bedrock-model-id ID [--endpoint-name NAME] [--runtime-name NAME] [--yes]
    agent-infra diff    --bedrock-model-id ID
    agent-infra destroy [--bedrock-model-id ID] [--yes]
    agent-infra status
    agent-infra demo    [demo arguments ...]

The agent streams speech from the endpoint ``speech-infra`` deployed (by name, default
``kokoro-82m``); deploying the agent never touches the speech stacks. ``demo`` belongs to the agent
package: everything after it goes to ``reference_agent.demo.main``. Exit status: 0 done, 2 a
prerequisite or setting is missing or wrong (nothing was changed), otherwise the failing CDK call's.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
from collections.abc import Sequence

from infra import account as aws
from infra.cdk_tool import CdkTool, aws_options
from infra.leftovers import aws_flags, image_leftover, log_group_leftover, print_leftovers
from infra.preflight import EXIT_MISSING, check_docker, check_node, find_cdk, report
from infra.settings import AGENT_RUNTIME_STACK, AGENT_STACKS, AgentSettings, SettingsError

TOOL = "agent-infra"


def build_parser() -> argparse.ArgumentParser:
    """The ``agent-infra`` argument parser (one subcommand per verb)."""
    parser = argparse.ArgumentParser(
        prog=TOOL,
        description="Deploy the reference voice agent to Amazon Bedrock AgentCore Runtime (ARM64), "
        "talking to the speech endpoint speech-infra deployed. See infra/README.md.",
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="{deploy,diff,destroy,status,demo}")
    aws = aws_options()

    for verb, help_text in (
        ("deploy", "build the ARM64 agent image and deploy the AgentCore runtime and its role"),
        ("diff", "show what deploy would change"),
        ("destroy", "delete the runtime and its role; print what is left and how to remove it"),
    ):
        sub = verbs.add_parser(verb, parents=[aws], help=help_text, description=help_text)
        sub.add_argument(
            "--bedrock-model-id",
            required=verb != "destroy",
            help="Bedrock model id, inference profile id or ARN the agent converses with"
            + (" (default: none; not needed to destroy)" if verb == "destroy" else ""),
        )
        if verb != "destroy":
            sub.add_argument(
                "--endpoint-name", help="speech endpoint the agent streams from (default: kokoro-82m)"
            )
            sub.add_argument("--runtime-name", help="AgentCore runtime name (default: kokoro_voice_agent)")
        if verb != "diff":
            sub.add_argument("--yes", action="store_true", help="do not ask for approval or confirmation")

    verbs.add_parser("status", parents=[aws], help="show the stacks, the runtime and its speech endpoint")
    verbs.add_parser(
        "demo",
        add_help=False,
        help="run the agent demo (reference_agent.demo); `agent-infra demo --help` shows its options",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agent-infra``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        # Everything after `demo` belongs to the demo's own parser, --help included.
        return run_demo(argv[1:])
    args = build_parser().parse_args(argv)
    if args.verb == "status":
        return _status(args)
    return _cdk_verb(args)


def run_demo(demo_args: list[str]) -> int:
    """Run ``reference_agent.demo.main(demo_args)``; 2 when the agent package cannot be imported."""
    try:
        # import_module reads sys.modules first, so an already-imported package attribute cannot mask it.
        demo = importlib.import_module("reference_agent.demo")
    except ImportError as error:
        print(
            f"{TOOL}: the agent demo is not available: the reference agent package is not installed or not "
            f"ready ({error}). Install it with: pip install -e '.[agent]'",
            file=sys.stderr,
        )
        return EXIT_MISSING
    result = demo.main(demo_args)
    return int(result or 0)


def _context(args: argparse.Namespace) -> dict[str, str]:
    context = {}
    for key, value in (
        ("bedrock_model_id", args.bedrock_model_id),
        ("agent_endpoint_name", getattr(args, "endpoint_name", None)),
        ("agent_runtime_name", getattr(args, "runtime_name", None)),
    ):
        if value is not None:
            context[key] = value
    return context


def _cdk_verb(args: argparse.Namespace) -> int:
    context = _context(args)
    try:
        settings = AgentSettings.from_context(context.get)
    except SettingsError as error:
        print(f"{TOOL}: {error}", file=sys.stderr)
        return EXIT_MISSING

    command, problems = find_cdk()
    problems += check_node()
    if args.verb == "deploy":
        problems += check_docker()
    account, aws_problems = aws.connect(args.profile, args.region)
    problems += aws_problems
    if account is not None and args.verb == "deploy":
        problems += aws.check_bootstrap(account)
    if problems:
        report(problems, tool=TOOL)
        return EXIT_MISSING
    assert command is not None and account is not None
    cdk = CdkTool(command, profile=args.profile, region=args.region)

    if args.verb == "diff":
        return cdk.run("diff", list(AGENT_STACKS), context=context, options=["--exclusively"])
    if args.verb == "deploy":
        return _deploy(args, cdk, account, settings, context)
    return _destroy(args, cdk, account, settings, context)


def _deploy(
    args: argparse.Namespace,
    cdk: CdkTool,
    account: aws.AwsAccount,
    settings: AgentSettings,
    context: dict[str, str],
) -> int:
    if aws.describe_endpoint(account, settings.endpoint_name) is None:
        print(
            f"{TOOL}: note: no SageMaker endpoint {settings.endpoint_name} in {account.region} yet; "
            "the agent cannot speak until `speech-infra deploy` creates it.",
            file=sys.stderr,
        )
    if platform.machine().lower() not in ("arm64", "aarch64"):
        print(
            f"{TOOL}: note: building the linux/arm64 image on {platform.machine()} uses QEMU emulation; "
            "if the build fails with 'exec format error', install it: "
            "docker run --privileged --rm tonistiigi/binfmt --install arm64",
            file=sys.stderr,
        )
    options = ["--exclusively", *(["--require-approval", "never"] if args.yes else [])]
    status = cdk.run("deploy", list(AGENT_STACKS), context=context, options=options)
    if status == 0:
        print(f"{TOOL}: agent runtime {settings.runtime_name} deployed; `{TOOL} status` shows its state.")
    return status


def _destroy(
    args: argparse.Namespace,
    cdk: CdkTool,
    account: aws.AwsAccount,
    settings: AgentSettings,
    context: dict[str, str],
) -> int:
    # Read the image tag and runtime name before the stack (and its outputs) is gone.
    runtime = aws.describe_stack(account, AGENT_RUNTIME_STACK)
    outputs = runtime.outputs if runtime else {}
    status = cdk.run("destroy", list(AGENT_STACKS), context=context, options=["--force"] if args.yes else [])
    if status != 0:
        return status
    flags = aws_flags(account.region, args.profile)
    print_leftovers(
        [
            image_leftover(
                outputs.get("ImageRepository"),
                outputs.get("ImageTag"),
                account_id=account.account_id,
                region=account.region,
                flags=flags,
            ),
            log_group_leftover(
                f"/aws/bedrock-agentcore/runtimes/{outputs.get('AgentRuntimeName', settings.runtime_name)}-",
                writer="AgentCore",
                flags=flags,
            ),
        ],
        tool=TOOL,
    )
    return 0


def _status(args: argparse.Namespace) -> int:
    account, problems = aws.connect(args.profile, args.region)
    if account is None:
        report(problems, tool=TOOL)
        return EXIT_MISSING
    print(f"agent in {account.account_id}/{account.region}:")
    runtime_stack = None
    for name in AGENT_STACKS:
        state = aws.describe_stack(account, name)
        print(f"  stack {name}: {state.status if state else 'not deployed'}")
        if name == AGENT_RUNTIME_STACK:
            runtime_stack = state
    runtime_id = runtime_stack.outputs.get("AgentRuntimeId") if runtime_stack else None
    runtime = aws.describe_agent_runtime(account, runtime_id) if runtime_id else None
    if runtime is None:
        print("  runtime: not deployed")
        return 0
    print(f"  runtime {runtime['agentRuntimeName']} ({runtime['agentRuntimeArn']}): {runtime['status']}")
    if runtime.get("failureReason"):
        print(f"    failure: {runtime['failureReason']}")
    environment = runtime.get("environmentVariables", {})
    if "BEDROCK_MODEL_ID" in environment:
        print(f"    model: {environment['BEDROCK_MODEL_ID']}")
    endpoint_name = environment.get("KOKORO_ENDPOINT_NAME")
    if endpoint_name:
        endpoint = aws.describe_endpoint(account, endpoint_name)
        state = endpoint["EndpointStatus"] if endpoint else "not deployed"
        print(f"    speech endpoint {endpoint_name}: {state}")
    return 0
