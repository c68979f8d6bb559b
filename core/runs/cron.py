"""Standard 5-field cron expressions (minute hour day-of-month month day-of-week, in UTC) and their next time.

Vixie cron's syntax: `*`, lists (`1,15`), ranges (`1-5`), steps (`*/15`, `10-50/20`), month and weekday names
(`JAN`, `MON-FRI`), weekday 0 or 7 for Sunday, and the macros `@yearly` (`@annually`), `@monthly`, `@weekly`,
`@daily` (`@midnight`) and `@hourly`. When both day fields are restricted a day matches either one (cron's rule).
Parsing is linear in the expression's length, which is bounded, and `next_after` looks at most a few thousand days
ahead, so an expression from the API cannot make it loop; one that never fires (`0 0 30 2 *`) is refused.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

MAX_LENGTH = 200
_SEARCH_DAYS = 366 * 9  # Feb 29 on a given weekday comes back within 28 years, but alone it fires every 4 to 8
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {
    m: i
    for i, m in enumerate(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], start=1)
}
_DAYS = {d: i for i, d in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
# name, low, high, names
_FIELDS = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)


class CronError(ValueError):
    """The expression is not valid 5-field cron, or never fires; the message says which part."""


@dataclass(frozen=True, kw_only=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day of month was `*`
    any_weekday: bool  # day of week was `*`

    def _day_matches(self, day: datetime) -> bool:
        weekday = (day.weekday() + 1) % 7  # Python's Monday=0 → cron's Sunday=0
        if self.any_day or self.any_weekday:  # one restricted: it alone decides; neither: every day
            return day.day in self.days and weekday in self.weekdays
        return day.day in self.days or weekday in self.weekdays

    def next_after(self, moment: datetime) -> datetime:
        """The first time strictly after `moment` (to the minute, same tzinfo) the expression fires."""
        start = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
        day = start.replace(hour=0, minute=0)
        for _ in range(_SEARCH_DAYS):
            if day.month in self.months and self._day_matches(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        candidate = day.replace(hour=hour, minute=minute)
                        if candidate >= start:
                            return candidate
            day += timedelta(days=1)
        raise CronError("the expression never fires")


def _value(text: str, field: tuple) -> int:
    name, low, high, names = field
    number = names.get(text.upper()) if names else None
    if number is None:
        if not text.isdigit():
            raise CronError(f"{name}: {text!r} is not a number{' or a name' if names else ''}")
        number = int(text)
    if not low <= number <= high:
        raise CronError(f"{name}: {number} is outside {low}-{high}")
    return number


def _field(text: str, field: tuple) -> frozenset[int]:
    name, low, high, _ = field
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise CronError(f"{name}: step {step_text!r} must be a whole number from 1")
            step = int(step_text)
        if body == "*":
            first, last = low, high
        elif "-" in body:
            a, _, b = body.partition("-")
            first, last = _value(a, field), _value(b, field)
            if first > last:
                raise CronError(f"{name}: range {body!r} runs backwards")
        elif body:
            first = _value(body, field)
            last = high if step_text else first  # `5/15`: from 5 on, every 15 (Vixie cron)
        else:
            raise CronError(f"{name}: empty part in {text!r}")
        values.update(range(first, last + 1, step))
    return frozenset(values)


def parse(expression: str) -> Cron:
    """The parsed expression; CronError names what is wrong (or says it never fires)."""
    if not isinstance(expression, str) or len(expression) > MAX_LENGTH:
        raise CronError(f"a cron expression is a string of at most {MAX_LENGTH} characters")
    text = _MACROS.get(expression.strip().lower(), expression)
    parts = text.split()
    if len(parts) != 5:
        raise CronError(
            f"a cron expression has 5 fields (minute hour day-of-month month day-of-week), not {len(parts)}"
        )
    minutes, hours, days, months, weekdays = (_field(p, f) for p, f in zip(parts, _FIELDS, strict=True))
    cron = Cron(
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=frozenset(d % 7 for d in weekdays),
        any_day=parts[2].startswith("*"),
        any_weekday=parts[4].startswith("*"),
    )
    cron.next_after(datetime(2000, 1, 1))  # refuse at once what never fires (the 30th of February)
    return cron
