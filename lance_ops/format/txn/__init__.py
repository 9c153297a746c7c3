"""Transactions and the commit protocol."""
