"""Test handler module that cannot be imported."""
raise RuntimeError("sm_test_broken_import cannot reach its cache at import time")
