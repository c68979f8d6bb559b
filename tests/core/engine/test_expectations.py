"""Agent test expectations, pure: no database, no model."""

from core.engine.expectations import evaluate, validate


def _observed(**kw):
    base = {
        "tool_calls": [
            {"name": "search", "arguments": {"query": "tea time"}, "step_id": "s1"},
            {"name": "append", "arguments": {"label": "human"}, "step_id": "s1"},
            {"name": "send_message", "arguments": {"message": "hi"}, "step_id": "s2"},
        ],
        "reply": "hi",
        "reply_step_id": "s2",
        "blocks": {"human": "Likes tea."},
        "block_steps": {"human": "s1"},
        "passages": ["the dragon is red"],
        "stop_reason": "end_turn",
        "steps": [{"id": "s1", "prompt_tokens": 900}, {"id": "s2", "prompt_tokens": 1200}],
        "cost_usd": 0.002,
    }
    return {**base, **kw}


def test_sequence_needs_the_order_and_set_does_not():
    calls = [{"name": "send_message"}, {"name": "search"}]
    assert evaluate({"tools": {"calls": calls, "order": "set"}}, _observed()) == []
    [failure] = evaluate({"tools": {"calls": calls, "order": "sequence"}}, _observed())
    assert failure["missing"] == {"name": "search"} and failure["expectation"] == "tools (sequence)"


def test_argument_matchers_take_values_and_regexes():
    assert evaluate({"tools": {"calls": [{"name": "search", "args": {"query": {"regex": "^tea"}}}]}}, _observed()) == []
    assert evaluate({"tools": {"calls": [{"name": "search", "args": {"query": "tea"}}]}}, _observed())
    assert evaluate({"tools": {"calls": [{"name": "search", "args": {"missing": "x"}}]}}, _observed())


def test_each_expectation_reports_expected_actual_and_the_step():
    spec = {
        "reply": {"matches": "^bye"},
        "blocks": [{"label": "human", "equals": "Likes coffee."}],
        "archival": {"matches": "blue"},
        "stop_reason": "max_steps",
        "max_steps": 1,
        "max_prompt_tokens_per_step": 1000,
        "max_cost_usd": 0.001,
    }
    failures = {f["expectation"]: f for f in evaluate(spec, _observed())}
    assert set(failures) == {
        "reply matches",
        "block human equals",
        "archival memory has a passage matching",
        "stop reason",
        "steps at most",
        "prompt tokens per step at most",
        "cost at most (USD)",
    }
    assert failures["reply matches"]["step_id"] == "s2" and failures["block human equals"]["step_id"] == "s1"
    assert failures["prompt tokens per step at most"] == {
        "expectation": "prompt tokens per step at most",
        "expected": 1000,
        "actual": 1200,
        "step_id": "s2",
    }
    assert evaluate({"max_cost_usd": 1}, _observed(cost_usd=None))[0]["actual"].startswith("unknown")
    assert evaluate({"blocks": [{"label": "persona", "contains": "x"}]}, _observed())[0]["actual"] is None


def test_validate_names_what_is_wrong():
    assert validate({"reply": {"contains": "x"}, "tools": {"calls": [{"name": "a"}], "order": "set"}}) == []
    problems = validate({"reply": {"matches": "("}, "tools": {"calls": [{}]}, "nope": 1, "blocks": [{"label": "h"}]})
    assert any("unknown expectation 'nope'" in p for p in problems)
    assert any("needs a name" in p for p in problems) and any("bad regular expression" in p for p in problems)
    assert any("label and one of" in p for p in problems)


def test_approvals_expect_the_calls_that_waited_in_order():
    seen = _observed(approval_requests=["archival_memory_insert"], approval_step_id="step-9")
    assert evaluate({"approvals": {"tools": ["archival_memory_insert"]}}, seen) == []
    [failure] = evaluate({"approvals": {"tools": ["core_memory_append", "archival_memory_insert"]}}, seen)
    assert failure["actual"] == ["archival_memory_insert"] and failure["step_id"] == "step-9"
    [failure] = evaluate({"approvals": {"tools": ["archival_memory_insert"]}}, _observed())
    assert failure["actual"] == []
    assert validate({"approvals": {"tools": [1]}}) and validate({"approvals": []})


def test_patterns_are_matched_by_re2_and_one_it_refuses_is_a_problem():
    long_reply = "a" * 50_000 + "!"  # Python's re would backtrack about 2**50000 steps on (a+)+$
    assert evaluate({"reply": {"matches": "(a+)+!$"}}, _observed(reply=long_reply)) == []
    [failure] = evaluate({"reply": {"matches": "(a+)+$"}}, _observed(reply=long_reply))
    assert failure["expectation"] == "reply matches"
    assert evaluate({"archival": {"matches": "DRAGON.*RED|dragon.*red"}}, _observed()) == []
    [problem] = validate({"tools": {"calls": [{"name": "search", "args": {"query": {"regex": "tea(?= time)"}}}]}})
    assert problem == (
        "bad regular expression 'tea(?= time)': lookahead (?=…) is not supported "
        "(patterns are matched by RE2, in time linear in the text)"
    )
    # a spec stored before patterns were checked by RE2 fails its check instead of raising
    [failure] = evaluate({"reply": {"matches": r"(h)\1"}}, _observed())
    assert failure["expectation"] == "reply matches"
