"""A job that marks rows processed, with every write fenced by its lease.

    python examples/fenced_job.py [DATABASE_URL]

The job takes a lease with keep-alive, and each batch's UPDATE carries
``lease.is_held_clause()`` in its WHERE: if the lease was lost (the process paused
past its ttl and another worker took over), the write changes nothing, so a stale
worker can never overwrite the new holder's work.
"""

from __future__ import annotations

import os
import sys
import tempfile

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, select, update

import joblocks

metadata = MetaData()
invoices = Table(
    "invoices",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("state", String(16), nullable=False),
)


def send_due_invoices(engine: object, model: joblocks.JobLockModel) -> int:
    """Mark due invoices as sent, in batches, only while the lease holds."""
    sent = 0
    with joblocks.lease("send-invoices", 30_000, model=model, keepalive=True) as held:
        while True:
            with engine.begin() as conn:  # type: ignore[attr-defined]
                batch = (
                    conn.execute(select(invoices.c.id).where(invoices.c.state == "due").limit(10))
                    .scalars()
                    .all()
                )
                if not batch:
                    return sent
                # ... deliver the invoices ...
                result = conn.execute(
                    update(invoices)
                    .where(invoices.c.id.in_(batch), held.is_held_clause())
                    .values(state="sent")
                )
                if result.rowcount == 0:
                    raise joblocks.LeaseLost("send-invoices", "fenced write refused")
                sent += result.rowcount


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        url = sys.argv[1] if len(sys.argv) > 1 else f"sqlite:///{os.path.join(folder, 'app.db')}"
        engine = create_engine(url)
        metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(invoices.delete())
            conn.execute(invoices.insert(), [{"id": i, "state": "due"} for i in range(35)])
        model = joblocks.JobLockModel(engine)  # the locks live in the same database
        print(f"sent {send_due_invoices(engine, model)} invoices")
        model.dispose()
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
