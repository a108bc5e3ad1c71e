"""AWS deployment of the reference server (SageMaker endpoint) and agent (AgentCore Runtime).

An AWS CDK v2 app (:mod:`infra.app`) and the two command-line tools that drive it, ``speech-infra``
(:mod:`infra.speech_cli`) and ``agent-infra`` (:mod:`infra.agent_cli`). infra/README.md explains
prerequisites, settings, costs and teardown.
"""
