"""What the card-payment traffic looks like: `TransactionSpec`."""

from __future__ import annotations

from dataclasses import dataclass

REGULARS = 3  # regular beneficiaries per payee


@dataclass(frozen=True)
class TransactionSpec:
    """What the generated traffic looks like.

    skew is the Zipf exponent of account popularity (0 = uniform; the default 0.5 gives the
    busiest of 50,000 payees ~0.2 % of all payments, 1 would give it ~9 %). regular_share is
    the chance that a payment goes to one of the payee's REGULARS regular beneficiaries
    instead of a random one.
    """

    payees: int = 50_000
    beneficiaries: int = 20_000
    skew: float = 0.5
    regular_share: float = 0.6
    amount_median: float = 30.0
    amount_sigma: float = 1.2
    payment_types: tuple[tuple[str, float], ...] = (("CRD", 0.7), ("CSH", 0.3))
    seed: int = 7
    first_id: int = 1

    def __post_init__(self) -> None:
        if self.payees <= 0 or self.beneficiaries <= 0:
            raise ValueError("payees and beneficiaries must be positive")
        if self.skew < 0 or not 0 <= self.regular_share <= 1:
            raise ValueError("skew must be >= 0 and regular_share in [0, 1]")
        if self.amount_median <= 0 or self.amount_sigma < 0:
            raise ValueError("amount_median must be positive and amount_sigma >= 0")
        if not self.payment_types or any(w <= 0 for _, w in self.payment_types):
            raise ValueError("payment_types needs at least one (name, positive weight)")


DEFAULT_SPEC = TransactionSpec()
