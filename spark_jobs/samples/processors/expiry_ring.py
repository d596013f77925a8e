"""When a bucket's remembered view_ids expire, without rewriting what does not expire.

The de-duplication keeps each view_id's first arrival as its own entry (a MapState keyed by
view_id, written once); this index says when to forget them. Entries are appended, as
(view_id, ts), to one of a fixed ring of lists (ListStates, appended to without reading):
each list gathers the entries whose expiry (ts + samples.dedup_ttl) falls in one time slot,
and is `due` at that slot's end. When the watermark reaches a list's due, every entry in it
has expired: the list is read once, its view_ids removed, and the list emptied for reuse.
The bucket keeps one event-time timer, at the earliest due.

So a micro-batch writes the state of its new first arrivals, not of every remembered view;
forgetting costs one removal per expired view, once per slot. A list may only ever be due
later than its entries' expiry (never earlier): when every list of the ring is taken, an
entry goes to the list due last, whose due is raised to cover it (it is then kept a little
longer, which the de-duplication allows: an expired first arrival is ignored when read).

Pure (no Spark): the processor holds the ring in a small value state, rewritten only when a
list is taken, raised or freed.
"""

from __future__ import annotations

import pickle

FORMAT = 1  # bumped when the layout changes (a checkpoint of another format is refused)
RING_SIZE = 12  # lists per bucket (state variables: fixed by the checkpoint)
SLOTS_PER_TTL = 8  # slot length = ttl / 8: a view_id is kept at most ~1/8 ttl past expiry


def slot_ms(ttl_ms: int) -> int:
    """The slot length for a de-duplication ttl."""
    return max(1, -(-ttl_ms // SLOTS_PER_TTL))


class ExpiryRing:
    """ring index -> due (watermark at which the list is read and emptied), pending only."""

    __slots__ = ("buckets", "dues", "size", "slot_ms")

    def __init__(self, buckets: int, slot: int, dues: dict[int, int] | None = None,
                 size: int = RING_SIZE) -> None:
        self.buckets = buckets
        self.slot_ms = slot
        self.size = size
        self.dues: dict[int, int] = dict(dues or {})

    def place(self, expiry_ms: int) -> int:
        """The list an entry expiring at `expiry_ms` goes to (the due of its slot's list; a
        free list; or the list due last, raised to cover it)."""
        due = (expiry_ms // self.slot_ms + 1) * self.slot_ms
        for index, pending in self.dues.items():
            if pending == due:
                return index
        free = next((i for i in range(self.size) if i not in self.dues), None)
        if free is not None:
            self.dues[free] = due
            return free
        last = max(self.dues, key=self.dues.__getitem__)
        self.dues[last] = max(self.dues[last], due)
        return last

    def pop_due(self, watermark_ms: int) -> list[int]:
        """The lists the watermark has reached (every entry in them expired), no longer
        pending."""
        due = sorted((d, i) for i, d in self.dues.items() if d <= watermark_ms)
        for _, index in due:
            del self.dues[index]
        return [index for _, index in due]

    def next_due(self) -> int | None:
        """The bucket's timer: the earliest due, None when nothing is remembered."""
        return min(self.dues.values()) if self.dues else None

    def is_empty(self) -> bool:
        return not self.dues

    def to_bytes(self) -> bytes:
        return pickle.dumps((FORMAT, self.buckets, self.slot_ms, self.size, self.dues),
                            protocol=5)

    @classmethod
    def from_bytes(cls, data: bytes | None, buckets: int, slot: int) -> ExpiryRing:
        """The stored ring (a new one if none); refused when written by another format or
        bucket count (its view_ids would now belong to other buckets). A stored slot length
        is kept (its lists' dues were computed with it); a new ttl applies to new entries
        through their expiry."""
        if not data:
            return cls(buckets, slot)
        version, stored_buckets, stored_slot, size, dues = pickle.loads(data)
        if version != FORMAT:
            raise RuntimeError(
                f"de-duplication index of format {version}, this version reads {FORMAT}: "
                "delete the job's checkpoint (<lake.checkpoints>/<job>) to rebuild its state")
        if stored_buckets != buckets:
            raise RuntimeError(
                f"the checkpoint's view_ids are in {stored_buckets} buckets, not "
                f"{buckets} (jobs.state_buckets): restore the setting, or delete the job's "
                "checkpoint to rebuild its state")
        return cls(buckets, stored_slot, dues, size)
