"""CrewAI's docs (human-feedback-in-flows.mdx, "Complete Example"): a review loop routed by the person's feedback,
classified into an outcome by the model, until the draft is approved; the feedback history on the flow."""

from unittest.mock import patch

from pydantic import BaseModel

from chatagent.crewai import LLM
from chatagent.crewai.flow.flow import Flow, listen, or_, start
from chatagent.crewai.flow.human_feedback import HumanFeedbackResult, human_feedback

SOURCE = "docs/en/learn/human-feedback-in-flows.mdx"
RULES = [
    ("contains", ["Needs more detail on alignment research"], "needs_revision"),
    ("contains", ["Looks good, approved!"], "approved"),
]


class ContentState(BaseModel):
    draft: str = ""
    revision_count: int = 0
    status: str = "pending"


def make_flow(server: str) -> type:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")

    class ContentApprovalFlow(Flow[ContentState]):
        @start()
        def generate_draft(self):
            self.state.draft = "# AI Safety\n\nThis is a draft about AI Safety..."
            return self.state.draft

        @human_feedback(
            message="Please review this draft. Approve, reject, or describe what needs changing:",
            emit=["approved", "rejected", "needs_revision"],
            llm=llm,
            default_outcome="needs_revision",
        )
        @listen(or_("generate_draft", "needs_revision"))
        def review_draft(self):
            self.state.revision_count += 1
            return f"{self.state.draft} (v{self.state.revision_count})"

        @listen("approved")
        def publish_content(self, result: HumanFeedbackResult):
            self.state.status = "published"
            return f"published after: {result.feedback}"

        @listen("rejected")
        def handle_rejection(self, result: HumanFeedbackResult):
            self.state.status = "rejected"
            return "rejected"

        @listen(publish_content)
        def audit(self):
            return [(fb.method_name, fb.outcome, fb.feedback) for fb in self.human_feedback_history]

    return ContentApprovalFlow


def main(server: str, workdir: str) -> None:
    flow = make_flow(server)()
    answers = ["Needs more detail on alignment research", "", "Looks good, approved!"]
    with patch("builtins.input", side_effect=answers):
        result = flow.kickoff()
    assert flow.state.status == "published", flow.state.status
    assert flow.state.revision_count == 3, flow.state.revision_count
    assert result == [
        ("review_draft", "needs_revision", "Needs more detail on alignment research"),
        ("review_draft", "needs_revision", ""),  # no feedback: the default outcome, the model not asked
        ("review_draft", "approved", "Looks good, approved!"),
    ], result
    last = flow.last_human_feedback
    assert last.output == "# AI Safety\n\nThis is a draft about AI Safety... (v3)", last.output
    assert last.outcome == "approved"


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
