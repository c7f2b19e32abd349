"""Test support shared by unit and integration tests (see tests/conftest.py)."""
