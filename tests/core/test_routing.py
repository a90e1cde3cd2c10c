"""The one routing of a verify's outcome, for a lap and for the task a resume finds in flight."""

from __future__ import annotations

import pytest

from overnight.core.resume import VerifyOutcome
from overnight.core.routing import Route, route_verdict


@pytest.mark.parametrize("resumed", [False, True])
def test_done_lands_whoever_judged_it(resumed: bool) -> None:
    assert route_verdict(VerifyOutcome.DONE, resumed=resumed).route is Route.LAND


@pytest.mark.parametrize("resumed", [False, True])
def test_a_verify_that_cannot_run_parks_naming_why(resumed: bool) -> None:
    routed = route_verdict(VerifyOutcome.CANNOT_RUN, cannot_run="exit 127", resumed=resumed)
    assert routed.route is Route.PARK
    assert routed.reason == "the verify command could not run (exit 127)"


def test_a_partial_state_parks_with_words_for_where_it_was_found() -> None:
    lap = route_verdict(VerifyOutcome.PARTIAL)
    resumed = route_verdict(VerifyOutcome.PARTIAL, resumed=True)
    assert (lap.route, resumed.route) == (Route.PARK, Route.PARK)
    assert lap.reason == "verify reports a partially applied state"
    assert "resumed" in resumed.reason and "needs a human" in resumed.reason


def test_a_lap_retries_while_attempts_are_left_and_parks_after() -> None:
    assert route_verdict(VerifyOutcome.NOT_DONE, attempt=1, retries=1).route is Route.RETRY
    last = route_verdict(VerifyOutcome.NOT_DONE, attempt=2, retries=1)
    assert (last.route, last.reason) == (Route.PARK, "not done after 2 attempt(s)")
    out_of_steps = route_verdict(VerifyOutcome.NOT_DONE, retries=5, steps_exhausted=True)
    assert out_of_steps.route is Route.PARK


def test_a_looping_agent_is_not_retried_however_many_attempts_are_left() -> None:
    routed = route_verdict(VerifyOutcome.NOT_DONE, looping=True, attempt=1, retries=9)
    assert routed.route is Route.PARK and "repeated the same tool call" in routed.reason


def test_a_resumed_task_not_done_goes_back_to_the_front_of_the_queue() -> None:
    # never retried in place, and never parked for attempts: its attempt is counted already
    routed = route_verdict(VerifyOutcome.NOT_DONE, resumed=True, attempt=9, retries=0)
    assert routed.route is Route.REQUEUE
