"""The queue daemon: event loop, connections, store, log and snapshots, replication."""
