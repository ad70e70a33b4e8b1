"""The events the dashboard lists, built from what happened (pure builders): slot moves and
overrides, crashes, failures and dead jobs, refusals, job actions, code reloads. Reads the
storage room only."""
