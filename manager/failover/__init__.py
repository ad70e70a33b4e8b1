"""Who leads and who is primary: the manager's own election (leader.py), and the sentinel
that leases the queue servers' primary and promotes a replica through the authority record
in the cluster database (authority.py, takeover.py, server_link.py). Reads storage only."""
