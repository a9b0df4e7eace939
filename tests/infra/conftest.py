"""Every infra test reads the session's one synthesis of the sample app (tests/conftest.py)."""
