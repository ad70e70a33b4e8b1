"""The wire format both sides share (docs/PROTOCOL.md), without I/O: command parsing for
the server, request encoding and reply parsing for the clients, and the errors on the wire.
Light to import: nothing here loads asyncio, the server or the clients."""
