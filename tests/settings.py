"""Test settings: the real settings plus a test-only app whose tools workers can import too.

Each pytest process gets its own PostgreSQL test database and its own Celery queue, handed to the
worker processes it starts, so concurrent test runs on one machine never share state.
"""

import json
import os

# The real settings refuse to start without a key when DEBUG is off (as it is in tests). Set in the
# environment, so the worker processes the tests start (which import these settings too) share it.
os.environ.setdefault("DJANGO_SECRET_KEY", "tests-only-secret-key-never-used-outside-the-test-suite-0123456789")
# The demo app (off by default without DEBUG) holds tools and data many tests use.
os.environ.setdefault("TOOLHUB_DEMO", "1")

from toolhub.settings import *  # noqa: E402, F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp.apps.TestAppConfig"]  # noqa: F405
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The test client and the browser tests' live server speak plain http; tests/posture/ checks the
# production values of these through toolhub.settings in a subprocess.
SECURE_SSL_REDIRECT = False
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = False

# Other tests start runs and decide approvals freely; tests/posture/ lowers the rates to test throttling.
REST_FRAMEWORK = {
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_THROTTLE_RATES": {"runs": "100000/minute", "decisions": "100000/minute", "calls": "100000/minute"},
}

# Tests log in with ``Client.login``, which authenticates without a request (axes refuses that) and tries wrong
# passwords on purpose; tests/posture/test_login_lockout.py turns the lockout on and checks it.
AXES_ENABLED = False

_run_id = os.environ.get("TOOLHUB_TEST_RUN_ID") or str(os.getpid())
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": f"test_toolhub_{_run_id}"}  # noqa: F405
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE") or f"toolhub-test-{_run_id}"

# Tests about other behaviour need no grants; tests/governance/ switch back to the production default
# ("deny": a user needs a grant) with the `settings` fixture and check it explicitly.
# The fake model servers, MCP servers and webhook receivers listen on loopback: allowed here, as DEBUG does.
TOOLHUB = {**TOOLHUB, "DEFAULT_TOOL_ACCESS": "allow", "OUTBOUND_ALLOWED_NETWORKS": ["127.0.0.0/8", "::1/128"]}  # noqa: F405

# The fault-injection run (benchmarks/chaos.py) gives its workers short leases and time limits, so that the
# calls of a killed worker are found and settled within seconds instead of minutes.
for _name in ("CALL_LEASE_SECONDS", "DEFAULT_TOOL_TIMEOUT_SECONDS"):
    if os.environ.get(f"TOOLHUB_{_name}"):
        TOOLHUB[_name] = float(os.environ[f"TOOLHUB_{_name}"])
# The benchmark's and the tests' workers that claim queued calls in batches (group commit).
if os.environ.get("TOOLHUB_WORKER_CLAIM_BATCH"):
    TOOLHUB["WORKER_CLAIM_BATCH"] = int(os.environ["TOOLHUB_WORKER_CLAIM_BATCH"])

# A worker started by tests/interceptors/ gets its interceptors (TOOLHUB["INTERCEPTORS"], as JSON) here.
if os.environ.get("TOOLHUB_TEST_INTERCEPTORS"):
    TOOLHUB["INTERCEPTORS"] = json.loads(os.environ["TOOLHUB_TEST_INTERCEPTORS"])

# A worker started by tests/integration/test_disclosure_worker.py searches tools with this provider (a dotted path).
if os.environ.get("TOOLHUB_TEST_SEARCH_PROVIDER"):
    TOOLHUB["TOOL_SEARCH_PROVIDER"] = os.environ["TOOLHUB_TEST_SEARCH_PROVIDER"]
