"""Config reload on a running manager: the new file read and validated, the difference
applied or refused, and the requests the dashboard and `slotmap config-reload` leave in the
database. Reads storage only; the service applies what it decides."""
