"""The queue daemon: event loop, connections, store, log and snapshots, replication.
Empty on purpose, so `queue_server.server.retry` or `.tokens` can be imported alone."""
