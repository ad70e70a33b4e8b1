"""What the manager keeps and reads: the tables (db.py, model.py), the store and its reads,
the history of plans and samples, the work the masters reported (stats.py), the database's
identity. The ground floor of the manager: it imports none of the other rooms."""
