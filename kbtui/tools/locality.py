"""The provider-locality gate: knowledge tools go only to models that run on this node.

The decision is made on the *effective* model, the one that actually runs the
turn after any pin or per-turn override, never on the configured default.
A model counts as node-local when it is served by Ollama or a llama.cpp server
listening on a loopback address and is not one of Ollama's cloud-offloaded
models (``…-cloud`` / ``…:cloud`` tags, which the local daemon forwards to a
hosted service). Anything else is a cloud model: refused unless the operator
set ``allow_cloud_model_access = true``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbtui.config import Config
from kbtui.loopback import is_loopback_url

OLLAMA = "ollama"
LLAMA_CPP = "llama.cpp"
LOCAL_PROVIDERS = frozenset({OLLAMA, LLAMA_CPP})

# Decision reason codes (content-free; safe to log and show).
NODE_LOCAL = "node_local"
CLOUD_ALLOWED = "cloud_model_allowed_by_operator"
CLOUD_REFUSED = "cloud_model_refused"


@dataclass(frozen=True)
class ModelEndpoint:
    """A chat model and where it runs."""

    provider: str
    model: str
    host: str


@dataclass(frozen=True)
class LocalityDecision:
    endpoint: ModelEndpoint
    node_local: bool
    tools_allowed: bool
    reason: str

    def notice(self) -> str | None:
        """The visible turn notice when the tools are withheld (names the effective model)."""
        if self.tools_allowed:
            return None
        return (
            f"The knowledge base is not offered to {self.endpoint.model or '(unnamed model)'}: it is not a "
            "node-local model. Use a local Ollama or llama.cpp model, or set "
            "allow_cloud_model_access = true in config.toml to let document text reach it."
        )


def effective_chat_model(config: Config, *, pinned_model: str | None = None, pinned_host: str | None = None) -> ModelEndpoint:
    """The model that will actually run a chat turn: a pin or override wins over the config."""
    return ModelEndpoint(
        provider=OLLAMA,
        model=(pinned_model or config.chat_model).strip(),
        host=(pinned_host or config.chat_host or config.ollama_host).strip(),
    )


def is_loopback_host(url: str) -> bool:
    """True when ``url`` names this machine by a loopback address (or ``localhost``);
    the addresses the name resolves to are checked again at each connection."""
    return is_loopback_url(url)


def is_cloud_offloaded_model(model: str) -> bool:
    """Ollama tags such as ``gpt-oss:120b-cloud`` run on a hosted service, not here."""
    tag = model.strip().lower().rsplit(":", 1)[-1]
    return tag == "cloud" or tag.endswith("-cloud")


def is_node_local(endpoint: ModelEndpoint) -> bool:
    """True only for a local provider on loopback running a model that stays local."""
    return (
        endpoint.provider in LOCAL_PROVIDERS
        and is_loopback_host(endpoint.host)
        and not is_cloud_offloaded_model(endpoint.model)
    )


def decide(endpoint: ModelEndpoint, *, allow_cloud_model_access: bool) -> LocalityDecision:
    """Whether the knowledge tools may be offered to the model at ``endpoint``."""
    if is_node_local(endpoint):
        return LocalityDecision(endpoint, True, True, NODE_LOCAL)
    if allow_cloud_model_access:
        return LocalityDecision(endpoint, False, True, CLOUD_ALLOWED)
    return LocalityDecision(endpoint, False, False, CLOUD_REFUSED)
