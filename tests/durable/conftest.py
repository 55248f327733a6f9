"""The durable tests need `maitre[durable]` (DBOS Transact): without it they are not collected."""

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("dbos") is not None else ["test_*.py"]
