"""Test configuration shared by every test package.

Fixture modules live in ``tests/support/`` and are registered here once.
"""

pytest_plugins = [
    "tests.support.workflows",
    "tests.support.openai_server",
    "tests.support.redis_server",
    "tests.support.postgres",
]
