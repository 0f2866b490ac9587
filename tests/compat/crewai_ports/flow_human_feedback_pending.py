"""CrewAI's docs (human-feedback-in-flows.mdx, "Async Human Feedback"): a provider pauses the flow for feedback
that comes later; another process restores it with `from_pending` and resumes it with the feedback."""

import os
import signal
import subprocess
import sys
from pathlib import Path

from chatagent.crewai import LLM
from chatagent.crewai.flow import (
    Flow,
    HumanFeedbackPending,
    HumanFeedbackProvider,
    PendingFeedbackContext,
    human_feedback,
    listen,
    start,
)

SOURCE = "docs/en/learn/human-feedback-in-flows.mdx"
RULES = [("contains", ["Lovely, ship it to the blog"], "approved")]
NOTIFIED = []


class WebhookProvider(HumanFeedbackProvider):
    def __init__(self, webhook_url: str):
        self.webhook_url = webhook_url

    def request_feedback(self, context: PendingFeedbackContext, flow: Flow) -> str:
        NOTIFIED.append(context.method_output)
        raise HumanFeedbackPending(
            context=context, callback_info={"webhook_url": f"{self.webhook_url}/{context.flow_id}"}
        )


def make_pipeline(server: str) -> type:
    reviewer = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")

    class ContentPipeline(Flow):
        @start()
        @human_feedback(
            message="Approve this content for publication?",
            emit=["approved", "rejected"],
            llm=reviewer,
            default_outcome="rejected",
            provider=WebhookProvider("https://myapp.example/api"),
        )
        def generate_content(self):
            return "AI-generated blog post content..."

        @listen("approved")
        def publish(self, result):
            return {"status": "published", "feedback": result.feedback, "content": result.output}

        @listen("rejected")
        def archive(self, result):
            return {"status": "archived"}

    return ContentPipeline


def on_feedback(server: str, flow_id: str, message: str):
    flow = make_pipeline(server).from_pending(flow_id)
    assert flow.pending_feedback.method_name == "generate_content"
    return flow.resume(message)


def main(server: str, workdir: str) -> None:
    pipeline = make_pipeline(server)
    result = pipeline().kickoff()
    assert isinstance(result, HumanFeedbackPending), result
    assert result.callback_info["webhook_url"].endswith(result.context.flow_id)
    assert result.context.method_output == "AI-generated blog post content..."
    assert NOTIFIED == ["AI-generated blog post content..."]
    # the webhook fires in another process: it restores the flow and resumes it with the feedback
    name = __name__ if __name__ != "__main__" else Path(__file__).stem
    root = Path(__file__).resolve().parents[name.count(".")]
    code = (
        f"import sys; sys.path.insert(0, {str(root)!r}); import {name} as port; "
        f"print(port.on_feedback({server!r}, {result.context.flow_id!r}, 'Lovely, ship it to the blog'))"
    )
    env = {**os.environ, "OPENAI_API_KEY": "EMPTY"}  # (CrewAI rebuilds the reviewer's LLM without its key)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=workdir,
                          env=env, preexec_fn=_default_sigint)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "'status': 'published'" in done.stdout and "Lovely, ship it to the blog" in done.stdout, done.stdout
    try:
        pipeline.from_pending(result.context.flow_id)
    except ValueError:
        pass
    else:
        raise AssertionError("a flow that was resumed is no longer pending")


def _default_sigint() -> None:
    """The child takes SIGINT as usual even when this runs as a background job (which inherits it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
