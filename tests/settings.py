"""The project's settings, with one change for the test run: a fast password hasher. PBKDF2's deliberate
slowness (a million rounds per hash) was most of the suite's wall time, spent creating accounts in fixtures.
Servers the tests start in subprocesses use this module too, so they check the passwords the tests set."""

from agents_ide.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
