"""The team at work, as reasoning (issue 37), through the official `openai` package.

Asked for (`reasoning={"summary": ...}` on the Responses API, or the `X-Agency-Show-Work: 1`
header on either API), each hop of the demo agency `studio` before its answer is a reasoning
summary part (`response.reasoning_summary_text.delta`) or a `reasoning_content` delta of Chat
Completions; not asked for, the streams are what they were.

    cargo build -p agency && python -m pytest -q tests/python -k show_work
"""

from __future__ import annotations

import json

import openai
from openai.types.responses import ResponseReasoningItem, ResponseReasoningSummaryTextDeltaEvent

from test_openai_sdk import TODO, Server, answer_for, fake, server, user  # noqa: F401

SHOW = {"X-Agency-Show-Work": "1"}


def work(request: str) -> list[str]:
    """The studio's work on `request`: a line a hop."""
    built = f"fn main() {{ /* Please build: {request} */ }}"
    review = f"Please review: {built}"
    arguments = json.dumps({"text": review}, separators=(",", ":"))
    return [
        f"manager asked programmer: Please build: {request}",
        f"programmer answered manager: {built}",
        f"manager asked reviewer: {review}",
        f"reviewer called builtin/echo with {arguments}",
        f"builtin/echo answered reviewer: {review}",
        f"reviewer answered manager: Approved: {review}",
    ]


def reasoning_of(delta_or_message) -> str | None:
    """`reasoning_content`, which the SDK keeps as an extra field."""
    return getattr(delta_or_message, "reasoning_content", None) or (
        delta_or_message.model_extra or {}
    ).get("reasoning_content")


def test_show_work_streamed_response(server: Server):
    with server.client() as client:
        events = list(
            client.responses.create(
                model="studio", input=TODO, stream=True, reasoning={"summary": "auto"}
            )
        )
        deltas = [e for e in events if e.type == "response.reasoning_summary_text.delta"]
        assert all(isinstance(d, ResponseReasoningSummaryTextDeltaEvent) for d in deltas)
        assert [d.delta for d in deltas] == work(TODO)
        assert [d.summary_index for d in deltas] == list(range(len(deltas)))
        assert {d.output_index for d in deltas} == {0}
        assert [e.sequence_number for e in events] == list(range(len(events)))
        final = events[-1].response
        reasoning, message = final.output
        assert isinstance(reasoning, ResponseReasoningItem)
        assert {d.item_id for d in deltas} == {reasoning.id}
        assert [s.text for s in reasoning.summary] == work(TODO)
        assert final.output_text == answer_for(TODO)
        assert final.reasoning.summary == "auto"
        assert final.usage.output_tokens_details.reasoning_tokens == 0
        # Stored as streamed.
        assert client.responses.retrieve(final.id).output == final.output

        # The header asks the same; the SDK's stream helper accumulates it.
        with client.responses.stream(model="studio", input=TODO, extra_headers=SHOW) as stream:
            final = stream.get_final_response()
        assert [s.text for s in final.output[0].summary] == work(TODO)
        assert final.output_text == answer_for(TODO)

        # Not asked: nothing of the work.
        events = list(client.responses.create(model="studio", input=TODO, stream=True))
        assert not [e.type for e in events if "reasoning" in e.type]
        assert [item.type for item in events[-1].response.output] == ["message"]


def test_show_work_chat_completions(server: Server):
    with server.client() as client:
        chunks = list(
            client.chat.completions.create(
                model="studio", messages=[user(TODO)], stream=True, extra_headers=SHOW
            )
        )
        deltas = [c.choices[0].delta for c in chunks if c.choices]
        reasoning = "".join(reasoning_of(d) or "" for d in deltas)
        assert reasoning == "\n".join(work(TODO))
        # The work comes before the answer, whose text is as it was.
        first_text = next(i for i, d in enumerate(deltas) if d.content)
        assert all(reasoning_of(d) is None for d in deltas[first_text:])
        assert "".join(d.content or "" for d in deltas) == answer_for(TODO)

        completion = client.chat.completions.create(
            model="studio", messages=[user(TODO)], extra_headers=SHOW
        )
        message = completion.choices[0].message
        assert reasoning_of(message) == "\n".join(work(TODO))
        assert message.content == answer_for(TODO)

        # Not asked: nothing of the work.
        chunks = list(
            client.chat.completions.create(model="studio", messages=[user(TODO)], stream=True)
        )
        assert all(reasoning_of(c.choices[0].delta) is None for c in chunks if c.choices)
        completion = client.chat.completions.create(model="studio", messages=[user(TODO)])
        assert reasoning_of(completion.choices[0].message) is None


def test_show_work_refuses_an_unknown_summary(server: Server):
    with server.client() as client:
        try:
            client.responses.create(model="studio", input=TODO, reasoning={"summary": "verbose"})
        except openai.BadRequestError as e:
            assert e.code == "invalid_value"
            assert e.param == "reasoning.summary"
        else:
            raise AssertionError("an unknown summary was accepted")
