"""The agent card: who the agent is, where and how to reach it, what it can do."""

from __future__ import annotations

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol

from jobs.registry import all_tools

JSONRPC_PATH = "/a2a/jsonrpc"
REST_PATH = "/a2a"
VERSION = "0.1.0"
MODES = ["text/plain", "application/json"]


def agent_card(base_url: str, *, extended: bool = False) -> AgentCard:
    """The public card, with each of the agent's tools as a skill in the extended one
    (for a caller with a token)."""
    card = AgentCard(
        name="agentsite",
        description=(
            "An agent that runs long tool calls as background jobs and keeps answering:"
            " it reads and tests a workspace, crawls and fetches pages, and writes reports."
            " A call that needs the user's approval, or a question the agent asks, leaves"
            " the task input-required until it is answered."
        ),
        version=VERSION,
        supported_interfaces=[
            AgentInterface(
                url=f"{base_url}{JSONRPC_PATH}",
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            ),
            AgentInterface(
                url=f"{base_url}{REST_PATH}",
                protocol_binding=TransportProtocol.HTTP_JSON.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            ),
            # The same endpoints speak A2A 0.3 to the clients that still do: JSON-RPC
            # by its method names, HTTP+JSON under /v1/ (the card's legacy fields
            # name the first of these).
            AgentInterface(
                url=f"{base_url}{JSONRPC_PATH}",
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_0_3,
            ),
            AgentInterface(
                url=f"{base_url}{REST_PATH}",
                protocol_binding=TransportProtocol.HTTP_JSON.value,
                protocol_version=PROTOCOL_VERSION_0_3,
            ),
        ],
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=True, extended_agent_card=True
        ),
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="An agentsite API token (/api/tokens)."
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList()})],
        default_input_modes=MODES,
        default_output_modes=MODES,
        skills=[
            AgentSkill(
                id="chat",
                name="Chat with background tools",
                description=(
                    "Answers a message, starting tools as background jobs and reporting"
                    " their results as they end."
                ),
                tags=["background-jobs", "reports", "tests"],
                examples=["Run the tests in the workspace and write me a report on them."],
            )
        ],
    )
    if extended:
        for tool in all_tools():
            card.skills.append(
                AgentSkill(
                    id=f"tool:{tool.name}",
                    name=tool.name,
                    description=tool.description,
                    tags=["tool", tool.kind],
                )
            )
    return card
