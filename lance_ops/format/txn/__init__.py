"""Transactions and the commit loop: operations, conflict checks, rebase, apply, commit handlers, manifest stores, idempotency, orphans."""
