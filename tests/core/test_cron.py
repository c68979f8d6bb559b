"""The 5-field cron parser (core.runs.cron): the next time of each kind of field, cron's either-day rule, names and
macros, and the expressions refused with a message saying why. Pure: no database."""

from datetime import UTC, datetime

import pytest

from core.runs.cron import CronError, parse

T0 = datetime(2026, 12, 7, 6, 35, 20, tzinfo=UTC)  # a Monday


def _next(expr: str, after: datetime = T0) -> datetime:
    return parse(expr).next_after(after)


def _at(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("* * * * *", _at(2026, 12, 7, 6, 36)),
        ("*/15 * * * *", _at(2026, 12, 7, 6, 45)),
        ("0 9 * * *", _at(2026, 12, 7, 9, 0)),
        ("0 6 * * *", _at(2026, 12, 8, 6, 0)),  # today's 06:00 has passed
        ("35 6 * * *", _at(2026, 12, 8, 6, 35)),  # strictly after: 06:35:20 is past this minute's start
        ("10-50/20 * * * *", _at(2026, 12, 7, 6, 50)),
        ("5/20 7 * * *", _at(2026, 12, 7, 7, 5)),
        ("0 9 * * 1-5", _at(2026, 12, 7, 9, 0)),
        ("0 9 * * MON-FRI", _at(2026, 12, 7, 9, 0)),
        ("0 9 * * TUE-FRI", _at(2026, 12, 8, 9, 0)),
        ("0 0 * * 0", _at(2026, 12, 13, 0, 0)),
        ("0 0 * * 7", _at(2026, 12, 13, 0, 0)),  # 7 is Sunday too
        ("0 0 * * sun", _at(2026, 12, 13, 0, 0)),
        ("30 8 1 * *", _at(2027, 1, 1, 8, 30)),
        ("0 0 1 jan,jul *", _at(2027, 1, 1, 0, 0)),
        ("0 9,17 * * *", _at(2026, 12, 7, 9, 0)),
        ("0 0 29 2 *", _at(2028, 2, 29, 0, 0)),
        ("0 0 31 * *", _at(2026, 12, 31, 0, 0)),
        ("@hourly", _at(2026, 12, 7, 7, 0)),
        ("@daily", _at(2026, 12, 8, 0, 0)),
        ("@weekly", _at(2026, 12, 13, 0, 0)),
        ("@monthly", _at(2027, 1, 1, 0, 0)),
        ("@yearly", _at(2027, 1, 1, 0, 0)),
    ],
)
def test_next_time(expr, expected):
    assert _next(expr) == expected


def test_both_day_fields_restricted_match_either_day():
    # The 15th or any Friday, cron's rule: Friday the 11th comes first, then the 15th (a Tuesday).
    assert _next("0 12 15 * 5") == _at(2026, 12, 11, 12, 0)
    assert _next("0 12 15 * 5", _at(2026, 12, 11, 12, 0)) == _at(2026, 12, 15, 12, 0)
    # One of them `*`: the other alone decides.
    assert _next("0 12 15 * *") == _at(2026, 12, 15, 12, 0)
    assert _next("0 12 */2 * 5") == _at(2026, 12, 11, 12, 0)  # `*/2` counts as `*`: Fridays on odd days only


def test_successive_times_of_a_recurring_expression():
    cron, times, t = parse("0 */6 * * *"), [], T0
    for _ in range(5):
        t = cron.next_after(t)
        times.append(t.hour)
    assert times == [12, 18, 0, 6, 12]


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("", "5 fields"),
        ("* * * *", "not 4"),
        ("* * * * * *", "not 6"),
        ("60 * * * *", "minute: 60 is outside 0-59"),
        ("* 24 * * *", "hour: 24"),
        ("* * 0 * *", "day of month: 0"),
        ("* * * 13 *", "month: 13"),
        ("* * * * 8", "day of week: 8"),
        ("*/0 * * * *", "step"),
        ("5-1 * * * *", "backwards"),
        ("a * * * *", "not a number"),
        ("* * * FOO *", "not a number or a name"),
        ("1,,2 * * * *", "empty part"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
        ("x" * 201, "at most 200"),
    ],
)
def test_refused_expressions_say_why(expr, says):
    with pytest.raises(CronError, match=says):
        parse(expr)
