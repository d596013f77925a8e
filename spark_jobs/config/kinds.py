"""The kinds of setting: how each is written, checked and shown.

Each error names `section.key` and says what to write instead, so a wrong value fails at
start, in one line. Lists accept a YAML list or comma-separated text (`click, save`), since
environment values are often written that way.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_jobs.config.durations import DurationError, format_duration_ms, parse_duration_ms
from spark_jobs.config.fields import ConfigError, Kind, plain_text
from spark_jobs.config.network import bind_problem

SECRET_MARKS = ("password", "secret", "sasl.jaas")  # map keys whose values `show` masks
MASK = "***"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _split(value: Any) -> Any:
    """`a, b,,` -> [a, b]; anything but text unchanged."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


@dataclass(frozen=True)
class Duration(Kind):
    """A duration written with its unit (`90s`, `15m`, `PT15M`, or `0`) -> milliseconds."""

    minimum: int = 0  # ms
    suffix = "_ms"

    def parse(self, value: Any, key: str) -> int:
        if _number(value) and value != 0:
            raise ConfigError(
                f"{key}: {value!r} has no unit; write e.g. {value}s or {value}ms (units ms, s, "
                "m, h, d), ISO 8601 like PT15M, or 0"
            )
        try:
            ms = parse_duration_ms(value)
        except DurationError as exc:
            raise ConfigError(f"{key}: {exc}") from exc
        if ms < self.minimum:
            raise ConfigError(f"{key} must be at least {self.minimum} ms, got {ms} ms")
        return ms

    def show(self, value: Any, given: Any) -> str:
        return given.strip() if isinstance(given, str) else format_duration_ms(value)


@dataclass(frozen=True)
class PositiveInt(Kind):
    """A count: an integer above zero (YAML `true` is not one)."""

    def parse(self, value: Any, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{key} must be a positive integer, got {value!r}")
        return value


@dataclass(frozen=True)
class Port(Kind):
    """A TCP port: an integer in 1..65535."""

    def parse(self, value: Any, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
            raise ConfigError(f"{key} must be a port number (1-65535), got {value!r}")
        return value


@dataclass(frozen=True)
class BindAddress(Kind):
    """The address a server listens on: an IP address (127.0.0.1, 0.0.0.0, ::1) or localhost."""

    def parse(self, value: Any, key: str) -> str:
        problem = bind_problem(value.strip() if isinstance(value, str) else value)
        if problem is not None:
            raise ConfigError(f"{key} {problem}")
        return str(value).strip()


@dataclass(frozen=True)
class PositiveNumber(Kind):
    """A number above zero -> float."""

    def parse(self, value: Any, key: str) -> float:
        if not _number(value) or value <= 0:
            raise ConfigError(f"{key} must be a positive number, got {value!r}")
        return float(value)


@dataclass(frozen=True)
class Fraction(Kind):
    """A share in [0, 1) (a tolerance: 1 would accept anything)."""

    def parse(self, value: Any, key: str) -> float:
        if not _number(value) or not 0 <= value < 1:
            raise ConfigError(
                f"{key} must be a fraction in [0, 1), e.g. 0.02 for 2 %, got {value!r}"
            )
        return float(value)


@dataclass(frozen=True)
class OpenFraction(Kind):
    """A probability strictly between 0 and 1 (a significance level)."""

    def parse(self, value: Any, key: str) -> float:
        if not _number(value) or not 0 < value < 1:
            raise ConfigError(f"{key} must be between 0 and 1 (exclusive), got {value!r}")
        return float(value)


@dataclass(frozen=True)
class Rate(Kind):
    """A rate in [0, 1], both ends included."""

    def parse(self, value: Any, key: str) -> float:
        if not _number(value) or not 0 <= value <= 1:
            raise ConfigError(
                f"{key} must be a rate in [0, 1], e.g. 0.999 for 99.9 %, got {value!r}"
            )
        return float(value)


@dataclass(frozen=True)
class Flag(Kind):
    """true or false (also the text `true`/`false`, any case)."""

    def parse(self, value: Any, key: str) -> bool:
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {value!r}")
        return value


@dataclass(frozen=True)
class Choice(Kind):
    """One of a fixed set of names."""

    options: tuple[str, ...]

    def parse(self, value: Any, key: str) -> str:
        if value not in self.options:
            raise ConfigError(f"{key} must be one of {', '.join(self.options)}, got {value!r}")
        return str(value)


@dataclass(frozen=True)
class Text(Kind):
    """Text taken as written. `optional`: empty means unset (the section derives a value);
    `form`: non-empty text of this form, blanks around it dropped."""

    optional: bool = False
    form: str | None = None

    def parse(self, value: Any, key: str) -> str | None:
        if self.form is not None:
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{key} must be {self.form}")
            return value.strip()
        if self.optional and not value:
            return None
        return str(value)


@dataclass(frozen=True)
class OptionalText(Kind):
    """Text, or null/empty for none."""

    def parse(self, value: Any, key: str) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ConfigError(f"{key} must be text, got {value!r}")
        return value


@dataclass(frozen=True)
class Names(Kind):
    """A list of names -> tuple. `optional`: null means unset (the section derives a value)
    and an empty list is allowed; `noun` says what the names are in the error."""

    noun: str = "names"
    optional: bool = False

    def parse(self, value: Any, key: str) -> tuple[str, ...] | None:
        if self.optional:
            if value is None:
                return None
            value = _split(value or [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{key} must be a list of {self.noun}, got {value!r}")
            return tuple(value)
        value = _split(value)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{key} must be a non-empty list of {self.noun}, got {value!r}")
        return tuple(value)


@dataclass(frozen=True)
class Emails(Kind):
    """E-mail addresses -> tuple; null or empty for none."""

    def parse(self, value: Any, key: str) -> tuple[str, ...]:
        if value is None or value == "":
            return ()
        value = _split(value)
        if not isinstance(value, list) or not all(isinstance(v, str) and "@" in v for v in value):
            raise ConfigError(f"{key} must be a list of e-mail addresses, got {value!r}")
        return tuple(value)


@dataclass(frozen=True)
class Map(Kind):
    """A map passed through key by key (client settings); null means empty. `show` masks
    the values of keys that look like credentials."""

    def parse(self, value: Any, key: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key} must be a map, got {value!r}")
        return dict(value)

    def show(self, value: Any, given: Any) -> str:
        return plain_text({k: MASK if _secret(k) else v for k, v in value.items()})


def _secret(name: Any) -> bool:
    return any(mark in str(name).lower() for mark in SECRET_MARKS)


@dataclass(frozen=True)
class IsoDate(Kind):
    """A calendar day like 2026-01-01 -> its ISO text; null or empty for none."""

    def parse(self, value: Any, key: str) -> str | None:
        if value is None or value == "":
            return None
        if isinstance(value, datetime.date):  # YAML reads 2026-01-01 as a date
            return value.isoformat()
        try:
            return datetime.date.fromisoformat(str(value)).isoformat()
        except ValueError:
            message = f"{key} must be a date like 2026-01-01, got {value!r}"
            raise ConfigError(message) from None


_URL_PASSWORD = re.compile(r"(://[^:/@]*:).*@")  # user:password@ (to the last @: unquoted)


@dataclass(frozen=True)
class DatabaseUrl(Kind):
    """A SQLAlchemy URL (dialect[+driver]://...), or null/empty for the derived default;
    `show` masks its password."""

    def parse(self, value: Any, key: str) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str) or not re.match(r"^[A-Za-z][\w+.-]*://", value):
            shown = _URL_PASSWORD.sub(rf"\1{MASK}@", str(value))
            raise ConfigError(
                f"{key} must be a SQLAlchemy URL like sqlite:///path/file.db or "
                f"postgresql+psycopg2://user:password@127.0.0.1:5433/db, got {shown!r}")
        return value

    def show(self, value: Any, given: Any) -> str:
        return plain_text(None if value is None else _URL_PASSWORD.sub(rf"\1{MASK}@", value))


@dataclass(frozen=True)
class Secret(OptionalText):
    """Text that `show` never prints (a password), or null/empty for none."""

    def show(self, value: Any, given: Any) -> str:
        return plain_text(None if value is None else MASK)
