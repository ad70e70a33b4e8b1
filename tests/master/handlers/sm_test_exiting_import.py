"""Test handler module that parses the command line at import, as a script would: argparse
meets the master's own arguments and calls sys.exit(2)."""
import argparse

from slot.handler import Handler, SlotJob, handler

parser = argparse.ArgumentParser()
parser.add_argument("--db")
ARGS = parser.parse_args()


@handler("exiting")
class Exiting(Handler):
    def handle_job(self, job: SlotJob) -> None:
        raise AssertionError("never reached")
