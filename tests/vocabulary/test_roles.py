"""`adapter.vocabulary.roles`: a role-bound metric's selector
gets its role, and one that excludes it is refused."""

from __future__ import annotations

import pytest

from adapter.errors import RoleConflict
from adapter.vocabulary.roles import Role, bind
from adapter.vocabulary.selectors import parse

PREFILL = Role("prefill")


def test_the_role_is_added_to_the_selector() -> None:
    bound = bind(parse("model_name=llama"), PREFILL, "m")
    assert bound == parse("model_name=llama,llm-d.ai/role=prefill")
    assert bound.to_promql() == ['llm_d_ai_role="prefill"', 'model_name="llama"']


def test_a_selector_that_already_names_the_role_is_the_same_key() -> None:
    """The cache key of a selector with the role and of one without is one key."""
    selector = parse("llm-d.ai/role=prefill,model_name=llama")
    assert bind(selector, PREFILL, "m") is selector
    assert bind(parse("model_name=llama"), PREFILL, "m") == selector


@pytest.mark.parametrize(
    "text",
    [
        "llm-d.ai/role=decode",
        "llm-d.ai/role in (decode,other)",
        "llm-d.ai/role notin (prefill)",
        "llm-d.ai/role!=prefill",
        "!llm-d.ai/role",
    ],
)
def test_a_selector_excluding_the_role_is_a_conflict(text: str) -> None:
    with pytest.raises(RoleConflict) as caught:
        bind(parse(f"model_name=llama,{text}"), PREFILL, "vllm_prefill_backlog_seconds")
    assert "reads the prefill pool (llm-d.ai/role=prefill)" in str(caught.value)
    status = caught.value.status("vllm_prefill_backlog_seconds")
    assert (status["code"], status["reason"]) == (400, "BadRequest")
    assert "llm-d.ai/role=prefill" in status["message"]


@pytest.mark.parametrize(
    "text", ["llm-d.ai/role", "llm-d.ai/role in (decode,prefill)", "llm-d.ai/role!=decode"]
)
def test_a_selector_compatible_with_the_role_keeps_its_requirement_and_gets_the_role(text: str) -> None:
    bound = bind(parse(text), PREFILL, "m")
    assert PREFILL.requirement in bound.requirements
    assert len(bound.requirements) == 2


def test_a_configured_key_and_value_are_used() -> None:
    role = Role("decode", "serving.kserve.io/component", "decoder")
    assert str(role) == "serving.kserve.io/component=decoder"
    assert bind(parse(""), role, "m").to_promql() == ['serving_kserve_io_component="decoder"']
    with pytest.raises(RoleConflict):
        bind(parse("serving.kserve.io/component=prefiller"), role, "m")
