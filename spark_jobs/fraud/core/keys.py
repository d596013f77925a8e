"""Reading transactions and building the dynamic grouping key of a rule.

Numbers are parsed so that their received JSON text survives: floats become `JsonDecimal`, a
`Decimal` that remembers the exact text it was read from (`21.50` stays `21.50`, `1e5` stays
`1e5`), and integers stay Python ints (whose text is the received one). The key text of the
contract, `{payeeId=25;beneficiaryId=12}`, can then use values "as their JSON text" without a
float round trip, and aggregation reads exact decimals. NaN/Infinity are not JSON and are
rejected.

Every message passes the JSON gate first (contracts/json_gate, CONTRACTS section 9: size,
UTF-8, lone surrogates, depth, int64, float range), so the exact parse below never meets a
number or a nesting that could blow it up. One case the gate lets through is checked here: a
zero with an extreme exponent (`0e-999999999` is a fine float), which exact decimal addition
would align to a billion digits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson

from spark_jobs.contracts.json_gate import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MalformedJson,
    compact_flat_object,
    is_flat_object,
    load_json,
)
from spark_jobs.contracts.records import MAX_TIME_MS

EVENT_TIME_FIELD = "eventTime"  # also read by the job's source, for the watermark
# The gate keeps non-zero numbers within the float range (adjusted exponents -324..308);
# zeros may carry any exponent, which exact sums would have to spell out.
MAX_ADJUSTED_EXPONENT = 400


class JsonDecimal(Decimal):
    """A JSON number with a fraction or exponent, carrying the text it was parsed from."""

    __slots__ = ("text",)

    text: str

    def __new__(cls, text: str) -> JsonDecimal:
        number = super().__new__(cls, text)
        if not -MAX_ADJUSTED_EXPONENT <= number.adjusted() <= MAX_ADJUSTED_EXPONENT:
            raise MalformedJson(f"number {text[:40]} has an exponent beyond "
                             f"+-{MAX_ADJUSTED_EXPONENT}")
        number.text = text
        return number


class TransactionError(ValueError):
    """A transaction message that cannot be evaluated (it goes to the dead letters)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def decode_text(raw: bytes | str | None) -> str:
    """The message as text; raises ValueError for a missing or non-UTF-8 message."""
    if raw is None:
        raise ValueError("empty message")
    if isinstance(raw, str):
        return raw
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8: {exc}") from exc


def lenient_text(raw: bytes | str | None) -> str:
    """The message as text for error reports, whatever its bytes."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    return bytes(raw).decode("utf-8", errors="replace")


# json.loads with keywords builds a new decoder per call: 8-10 % of the engine CPU (BENCHMARKS.md)
_DECODER = json.JSONDecoder(parse_float=JsonDecimal, parse_constant=_reject_constant)


def loads_json(text: str) -> Any:
    """json.loads keeping number text (see the module docstring); ValueError when invalid."""
    if text.startswith("\ufeff"):  # what json.loads refuses before decoding
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _DECODER.decode(text)


def gated_json(raw: bytes | str | None, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
               ) -> tuple[str, Any]:
    """The message's text and its exact parse, once it has passed the JSON gate; else
    MalformedJson naming what is wrong."""
    if type(raw) is bytes:  # a transaction's usual form: a third of the parse saved
        compact = compact_flat_object(raw, max_bytes)
        if compact is not None:
            return raw.decode(), exact_floats(compact)
    decoded = load_json(raw, max_bytes)
    try:
        text = decode_text(raw)
        exact = exact_from_gate(decoded, raw)
        return text, loads_json(text) if exact is None else exact
    except MalformedJson:
        raise
    except ValueError as exc:  # JSONDecodeError is a ValueError
        raise MalformedJson(f"not valid JSON: {exc}") from None
    except RecursionError:  # the gate bounds depth; never let one message unwind the stack
        raise MalformedJson("JSON nested too deeply") from None


def exact_from_gate(decoded: Any, raw: bytes | str | None) -> dict[str, Any] | None:
    """loads_json's result, made from the gate's own parse when that is certain to be it;
    None otherwise (the caller parses the text again).

    The gate's parse (orjson) reads numbers with a fraction or exponent as floats, losing
    their text. A flat object that orjson writes back byte for byte as it came (compact,
    as producers write JSON) holds every float literal exactly as orjson writes that float,
    so each one's text is known without the standard library's second parse, which cost
    2.5 of the 5 µs a transaction's parse took in every engine shard (BENCHMARKS.md).
    Anything else (spaces, `21.50`, `1e-07`, escapes, nesting, repeated keys) does not
    read back the same and is parsed again."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if not is_flat_object(decoded) or orjson.dumps(decoded) != data:
        return None
    return exact_floats(decoded)


def exact_floats(decoded: dict[str, Any]) -> dict[str, Any]:
    """A flat object orjson wrote back as it came, its floats made JsonDecimals of their
    text (within the float range, as orjson writes them: no exponent check)."""
    for name, value in decoded.items():
        if type(value) is float:
            text = orjson.dumps(value).decode()
            number = _new_decimal(JsonDecimal, text)
            number.text = text
            decoded[name] = number
    return decoded


_new_decimal = Decimal.__new__


def json_text(value: Any) -> str:
    """Compact JSON text of a parsed value, numbers exactly as received."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, JsonDecimal):
        return value.text
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        items = ",".join(f"{json_text(str(k))}:{json_text(v)}" for k, v in value.items())
        return "{" + items + "}"
    if isinstance(value, Sequence):
        return "[" + ",".join(json_text(v) for v in value) + "]"
    raise TypeError(f"not a JSON value: {value!r}")


def key_value_text(value: Any) -> str:
    """One value of the key text: strings unquoted, everything else as its JSON text."""
    kind = type(value)  # the common cases first: this runs for every rule and transaction
    if kind is str:
        return value
    if kind is int:
        return str(value)
    if isinstance(value, str):
        return value
    return json_text(value)


def grouping_key(transaction: Mapping[str, Any], names: Sequence[str]) -> str:
    """`{f=v;g=w}` over the rule's groupingKeyNames in order; a missing field reads `null`."""
    get = transaction.get
    return "{" + ";".join(f"{name}={key_value_text(get(name))}" for name in names) + "}"


def key_builder(names: Sequence[str]) -> Callable[[Mapping[str, Any]], str]:
    """grouping_key for fixed names, with the text around the values prepared once (it runs
    for every rule and transaction)."""
    if len(names) == 1:
        prefix, (name,) = "{" + names[0] + "=", names

        def one(transaction: Mapping[str, Any]) -> str:
            return prefix + key_value_text(transaction.get(name)) + "}"

        return one
    if len(names) == 2:
        (first, second) = names
        head, middle = "{" + first + "=", ";" + second + "="

        def two(transaction: Mapping[str, Any]) -> str:
            get = transaction.get
            return head + key_value_text(get(first)) + middle + key_value_text(get(second)) + "}"

        return two
    return lambda transaction: grouping_key(transaction, names)


@dataclass(frozen=True, slots=True)
class Transaction:
    """A decoded transaction: its identity and event time, its fields, its received text."""

    transaction_id: int | str
    event_time: int
    fields: dict[str, Any]
    text: str

    @property
    def id_key(self) -> str:
        """The transactionId as JSON text: a plain string key that keeps 1 and "1" apart."""
        return json_text(self.transaction_id)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_transaction(raw: bytes | str | None, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
                      ) -> Transaction:
    """Decode and validate one `transactions` message; TransactionError says why it is unusable.

    A transaction needs a transactionId (JSON integer or string) and an integer eventTime in
    epoch ms (at most the year 9999 either side of 1970, so that clean-up timers, event times
    plus windows, fit a long); every other field is optional (the rules skip what they cannot
    read)."""
    try:
        text, fields = gated_json(raw, max_bytes)
    except MalformedJson as exc:
        raise TransactionError(str(exc)) from None
    if not isinstance(fields, dict):
        raise TransactionError("a transaction must be a JSON object")
    if "transactionId" not in fields:
        raise TransactionError("missing field 'transactionId'")
    transaction_id = fields["transactionId"]
    if not (_is_int(transaction_id) or isinstance(transaction_id, str)):
        raise TransactionError("'transactionId' must be a JSON integer or string")
    if EVENT_TIME_FIELD not in fields:
        raise TransactionError("missing field 'eventTime'")
    event_time = fields[EVENT_TIME_FIELD]
    if not _is_int(event_time):
        raise TransactionError("'eventTime' must be an integer (epoch milliseconds)")
    if not -MAX_TIME_MS <= event_time <= MAX_TIME_MS:  # timers add windows to event times
        raise TransactionError(
            f"'eventTime' is not an epoch time in milliseconds (beyond the year 9999): "
            f"{event_time}")
    return Transaction(transaction_id, event_time, fields, text.strip())
