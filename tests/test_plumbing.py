"""Account plumbing is judged by meaning in context, not by keywords: both lists, table-driven."""

from __future__ import annotations

import pytest

from synth.artifacts import TaskBatch, ToolSpecAnswer
from synth.pipeline.stages.build.plumbing import task_plumbing, tool_plumbing
from synth.pipeline.stages.build.tasks import task_problems
from synth.pipeline.stages.build.tool_spec import spec_problems

REJECTED_TOOLS = [
    "login", "login_user", "logout", "log_in", "sign_in", "sign_up_user", "signup", "register_user_account",
    "reset_password", "change_member_password", "create_session", "end_session", "get_current_session",
    "create_user_session", "refresh_auth_token", "get_auth", "authenticate_user", "verify_otp",
    "enable_two_factor_auth", "validate_credentials", "update_pin",
]
ACCEPTED_TOOLS = [
    "create_course_session", "search_course_sessions", "book_therapy_session", "list_session_attendees",
    "create_prior_auth_request", "get_prior_auth_status", "approve_prior_auth", "get_wifi_password",
    "set_door_passcode", "log_maintenance_visit", "sign_lease", "cancel_booking", "open_account",
]
# Words the schema uses for its own records are domain words.
SCHEMA = {"sessions": ["id", "course_id", "starts_at"], "visitor_sign_ins": ["id", "visitor", "signed_in_at"],
          "user_sessions": ["id", "user_id", "token", "last_login"]}
IN_CONTEXT = [("list_sessions", True), ("schedule_session", True), ("record_sign_in", True),
              ("create_user_session", False)]  # a table of login tokens is plumbing itself

REJECTED_TASKS = [
    "Log me into my account please",
    "I can't log in to the portal, can you help?",
    "Reset my password to hunter2",
    "Sign up a new user account for jane@example.com",
    "Create a user account for Dana Reyes",
    "Enable two-factor authentication for my login",
    "Change the password on my online portal account",
]
ACCEPTED_TASKS = [
    "Sign Emma up for the Saturday wine class session on 2025-06-07",
    "Sign in the visitor Tom Baker at reception",
    "Submit a prior authorization request for patient 12's MRI",
    "What's the guest Wi-Fi password for meeting room B?",
    "Open a new savings account for Ana Lopez with a 200.00 deposit",
    "Book a therapy session for Mark Olsen on 2025-06-10 at 15:00",
    "Log the delivery of 12 boxes of printer paper",
    "Change the door code of locker 14 to 4471",
]


@pytest.mark.parametrize("name,plumbing", [(n, True) for n in REJECTED_TOOLS] + [(n, False) for n in ACCEPTED_TOOLS])
def test_tools_are_judged_by_meaning(name, plumbing):
    assert (tool_plumbing(name) is not None) is plumbing


@pytest.mark.parametrize("name,passes", IN_CONTEXT)
def test_the_schema_is_the_context(name, passes):
    assert (tool_plumbing(name, SCHEMA) is None) is passes
    assert tool_plumbing(name) is not None  # without the schema, the bare word is plumbing


@pytest.mark.parametrize("text,plumbing", [(t, True) for t in REJECTED_TASKS] + [(t, False) for t in ACCEPTED_TASKS])
def test_tasks_are_judged_by_meaning(text, plumbing):
    assert (task_plumbing(text) is not None) is plumbing


def test_the_stage_checks_say_how_to_stay_lawful():
    tool = {"name": "create_session", "description": "Create a session for a course date", "read_only": False,
            "params": []}
    problems = " | ".join(spec_problems(ToolSpecAnswer.model_validate({"tools": [tool]}), whole=False))
    assert "looks like account plumbing" in problems and "create_course_session" in problems
    renamed = ToolSpecAnswer.model_validate({"tools": [{**tool, "name": "create_course_session"}]})
    assert spec_problems(renamed, whole=False) == []
    tasks = [{"instruction": t, "kind": "write", "difficulty": "easy"} for t in ACCEPTED_TASKS]
    assert not any("plumbing" in p for p in task_problems(TaskBatch.model_validate({"tasks": tasks})))
