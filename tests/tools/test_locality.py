"""The provider-locality gate, decided on the effective model."""

from __future__ import annotations

import dataclasses

import pytest

from kbtui.config import Config
from kbtui.tools.locality import (
    CLOUD_ALLOWED,
    CLOUD_REFUSED,
    NODE_LOCAL,
    ModelEndpoint,
    decide,
    effective_chat_model,
    is_loopback_host,
    is_node_local,
)


@pytest.mark.parametrize(
    "host",
    ["http://127.0.0.1:11434", "http://localhost:11434", "127.0.0.1:8080", "http://127.8.9.10", "http://[::1]:11434",
     "http://[::ffff:127.0.0.1]:11434", "https://LOCALHOST."],
)
def test_loopback_hosts(host):
    assert is_loopback_host(host)


@pytest.mark.parametrize(
    "host",
    ["https://ollama.com", "http://10.0.0.5:11434", "http://192.168.1.2:11434", "http://0.0.0.0:11434",
     "http://127.0.0.1.nip.io:11434", "http://localhost.example.com", "http://[::2]", "", "http://"],
)
def test_hosts_that_are_not_this_machine(host):
    assert not is_loopback_host(host)


def test_the_gate_allows_a_node_local_model():
    decision = decide(ModelEndpoint("ollama", "llama3.2", "http://127.0.0.1:11434"), allow_cloud_model_access=False)
    assert decision.tools_allowed and decision.node_local and decision.reason == NODE_LOCAL
    assert decision.notice() is None
    assert is_node_local(ModelEndpoint("llama.cpp", "qwen2.5-7b", "http://localhost:8080"))


@pytest.mark.parametrize(
    "endpoint",
    [
        ModelEndpoint("ollama", "llama3.2", "https://ollama.com"),  # a remote Ollama
        ModelEndpoint("ollama", "gpt-oss:120b-cloud", "http://127.0.0.1:11434"),  # offloaded by the local daemon
        ModelEndpoint("ollama", "kimi-k2:cloud", "http://127.0.0.1:11434"),
        ModelEndpoint("openai", "gpt-5", "http://127.0.0.1:9000"),  # a cloud provider behind a local proxy
        ModelEndpoint("azure-foundry", "gpt-4o", "https://example.openai.azure.com"),
    ],
)
def test_the_gate_refuses_a_cloud_model_unless_the_operator_opts_in(endpoint):
    refused = decide(endpoint, allow_cloud_model_access=False)
    assert not refused.tools_allowed and refused.reason == CLOUD_REFUSED
    assert endpoint.model in refused.notice() and "allow_cloud_model_access" in refused.notice()
    allowed = decide(endpoint, allow_cloud_model_access=True)
    assert allowed.tools_allowed and not allowed.node_local and allowed.reason == CLOUD_ALLOWED


def test_the_effective_model_is_the_pin_not_the_configured_default(tmp_path):
    config = dataclasses.replace(Config(home=tmp_path), chat_model="llama3.2")
    assert decide(effective_chat_model(config), allow_cloud_model_access=False).tools_allowed
    pinned = effective_chat_model(config, pinned_model="deepseek-v3.1:671b-cloud")
    assert pinned.model == "deepseek-v3.1:671b-cloud"
    assert not decide(pinned, allow_cloud_model_access=False).tools_allowed
    # And the other way round: a remote default (which only an opt-in lets load), a pin
    # to this machine's server.
    remote = dataclasses.replace(config, chat_host="https://gpu.example.net", allow_cloud_model_access=True)
    assert not decide(effective_chat_model(remote), allow_cloud_model_access=False).tools_allowed
    local_pin = effective_chat_model(remote, pinned_host="http://127.0.0.1:11434")
    assert decide(local_pin, allow_cloud_model_access=False).tools_allowed


def test_the_opt_in_is_read_from_config_toml(tmp_path):
    assert Config.load(tmp_path).allow_cloud_model_access is False
    (tmp_path / "config.toml").write_text("allow_cloud_model_access = true\nchat_model = 'x'\n")
    assert Config.load(tmp_path).allow_cloud_model_access is True
