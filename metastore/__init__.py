"""The metadata store: a Raft-replicated key/value state machine
(:mod:`metastore.store`, :mod:`metastore.raft_node`), its gRPC server and the
async client library that bookies and brokers use."""
