"""Bookies (the entry storage server) and the ledger client library that
brokers use to write and read replicated ledgers."""
