"""What MCP servers give, as chatagent sees it: tool results and resource contents as message content, and a
server's resources and prompts as four tools (`<server>-list_resources`, `<server>-read_resource`,
`<server>-list_prompts`, `<server>-get_prompt`), made for a server that offers them (see `chatagent.tools.mcp`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from chatagent.schema import ContentItem
from chatagent.tools.base import BaseTool

if TYPE_CHECKING:
    from mcp.types import BlobResourceContents, CallToolResult, GetPromptResult, Prompt, TextResourceContents

MAX_LISTED = 200  # resources or prompts listed to the model at most


def contents_item(res: TextResourceContents | BlobResourceContents) -> ContentItem:
    """One resource's contents as a content item: text with its URI, an image, or a note for other binaries."""
    text = getattr(res, "text", None)
    if isinstance(text, str):
        return ContentItem(text=f"[resource {res.uri}]\n{text}")
    blob = getattr(res, "blob", "")
    if res.mime_type and res.mime_type.startswith("image/"):
        return ContentItem(image=f"data:{res.mime_type};base64,{blob}")
    return ContentItem(text=f"[resource {res.uri} ({res.mime_type or 'binary'}), not shown]")


def as_content(items: list[ContentItem]) -> str | list[ContentItem]:
    """Content items as message content: a string when they are all text."""
    texts = [i.text for i in items if i.text is not None]
    return "\n".join(texts) if len(texts) == len(items) else items


def result_to_content(result: CallToolResult) -> str | list[ContentItem]:
    """A CallToolResult as message content: a string when it is all text, else content items."""
    items: list[ContentItem] = []
    for c in result.content:
        if c.type == "text":
            items.append(ContentItem(text=c.text))
        elif c.type == "image":
            items.append(ContentItem(image=f"data:{c.mime_type or 'image/png'};base64,{c.data}"))
        elif c.type == "audio":
            items.append(ContentItem(audio=f"data:{c.mime_type or 'audio/wav'};base64,{c.data}"))
        elif c.type == "resource":
            items.append(contents_item(c.resource))
        elif c.type == "resource_link":
            items.append(ContentItem(text=f"[resource link {c.uri}]"))
        else:
            items.append(ContentItem(text=f"[{c.type or 'unknown'} content, not shown]"))
    if not items:
        structured = result.structured_content or None
        return json.dumps(structured, ensure_ascii=False) if structured is not None else ""
    return as_content(items)


class _ServerTool(BaseTool):
    """A tool that asks an MCP server something other than a tool call (its failures are messages too)."""

    suffix = ""

    def __init__(self, connection: Any) -> None:  # a chatagent.tools.mcp.MCPConnection
        self.name = f"{connection.name}-{self.suffix}"
        self.connection = connection
        super().__init__({"timeout": connection.timeout + connection.connect_timeout + 5.0})

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str | list[ContentItem]:
        args = self.parse_params(params)
        try:
            return self.ask(args)
        except Exception as e:  # TimeoutError or MCPServerError: what the model can read, as for tool calls
            return self.connection.failure(self.name, e)

    def ask(self, args: dict[str, Any]) -> str | list[ContentItem]:
        raise NotImplementedError

    def close(self) -> None:
        self.connection.close()


class ListResources(_ServerTool):
    suffix = "list_resources"
    parameters = {"type": "object", "properties": {}}

    def __init__(self, connection: Any) -> None:
        self.description = f"List the resources (documents, data) the {connection.name} server offers: URI, name, " \
            "description. Read one with its read_resource tool."  # fmt: skip
        super().__init__(connection)

    def ask(self, args: dict[str, Any]) -> str:
        found = self.connection.list_resources()
        lines = [f"{r.uri}  {r.name}" + (f": {r.description}" if r.description else "") for r in found[:MAX_LISTED]]
        more = f"\n({len(found) - MAX_LISTED} more not listed)" if len(found) > MAX_LISTED else ""
        return ("\n".join(lines) + more) if lines else "The server offers no resources."


class ReadResource(_ServerTool):
    suffix = "read_resource"
    parameters = {
        "type": "object",
        "properties": {"uri": {"type": "string", "description": "The resource's URI, as listed."}},
        "required": ["uri"],
    }

    def __init__(self, connection: Any) -> None:
        self.description = f"Read a resource of the {connection.name} server by its URI."
        super().__init__(connection)

    def ask(self, args: dict[str, Any]) -> str | list[ContentItem]:
        return as_content([contents_item(c) for c in self.connection.read_resource(str(args["uri"]))])


class ListPrompts(_ServerTool):
    suffix = "list_prompts"
    parameters = {"type": "object", "properties": {}}

    def __init__(self, connection: Any) -> None:
        self.description = f"List the prompts (ready-made instructions) the {connection.name} server offers, with " \
            "their arguments. Get one with its get_prompt tool."  # fmt: skip
        super().__init__(connection)

    def ask(self, args: dict[str, Any]) -> str:
        lines: list[str] = []
        prompts: list[Prompt] = self.connection.list_prompts()
        for p in prompts[:MAX_LISTED]:
            params = ", ".join(a.name + ("" if a.required else "?") for a in p.arguments or [])
            lines.append(f"{p.name}({params})" + (f": {p.description}" if p.description else ""))
        return "\n".join(lines) if lines else "The server offers no prompts."


class GetPrompt(_ServerTool):
    suffix = "get_prompt"
    parameters = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The prompt's name, as listed."},
            "arguments": {
                "type": "object",
                "description": "Its arguments (strings).",
                "additionalProperties": {"type": "string"},
            },
        },  # fmt: skip
        "required": ["name"],
    }

    def __init__(self, connection: Any) -> None:
        self.description = f"Get a prompt of the {connection.name} server, filled in with its arguments."
        super().__init__(connection)

    def ask(self, args: dict[str, Any]) -> str | list[ContentItem]:
        given: dict[str, Any] = args.get("arguments") or {}
        result: GetPromptResult = self.connection.get_prompt(
            str(args["name"]), {str(k): str(v) for k, v in given.items()}
        )
        items: list[ContentItem] = []
        for m in result.messages:
            c = m.content
            if c.type == "text":
                items.append(ContentItem(text=f"[{m.role}] {c.text}"))
            elif c.type == "resource":
                items.append(contents_item(c.resource))
            elif c.type == "image":
                items.append(ContentItem(image=f"data:{c.mime_type or 'image/png'};base64,{c.data}"))
            else:
                items.append(ContentItem(text=f"[{m.role}] [{c.type} content, not shown]"))
        return as_content(items)


def server_tools(connection: Any, capabilities: Any) -> list[BaseTool]:
    """The resource and prompt tools of a server, for what its `capabilities` (ServerCapabilities) offer."""
    out: list[BaseTool] = []
    if capabilities is not None and capabilities.resources is not None:
        out += [ListResources(connection), ReadResource(connection)]
    if capabilities is not None and capabilities.prompts is not None:
        out += [ListPrompts(connection), GetPrompt(connection)]
    return out


__all__ = ["GetPrompt", "ListPrompts", "ListResources", "ReadResource", "result_to_content", "server_tools"]
