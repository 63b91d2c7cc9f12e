"""Review 2026-12-06 (u): reviewing review m (``toolhub.W007``, refusals naming the tool, NFKC readings of names).

Finding (fails on ba19785, passes after the fix):

1. ``manage.py check --database default`` and every ``migrate`` printed one warning per saved row without bound
   (``references.reference_warnings``, shared by ``toolhub.W006``, ``toolhub.W007`` and ``approvals.W001``): a
   platform narrowing ``CREDENTIAL_ENV_PREFIXES`` (or adding a tool whose ``Secret`` reads a variable) over its
   tenants' remote MCP credentials got thousands of ``W007`` at each deploy; now the first 25 are named (row, field,
   variable, why, hint) and the rest counted in one more warning of the same id saying how to get the next ones.

Checked and holds:
- fresh checkout: ``migrate`` on an empty SQLite file and on an empty PostgreSQL database runs the checks before the
  tables exist without failing (``saved_rows`` reads in a savepoint and reports nothing on a ``DatabaseError``);
  ``load_demo`` then ``manage.py check --database default`` (and ``check --deploy --database default``) report no
  ``W007`` on the demo data (its provider reads ``OLLAMA_API_KEY``, the demo tool's Secret ``DEMO_NOTIFY_API_KEY``);
  ``check --deploy`` without ``--database`` does not read the database;
- cost at each ``migrate``: 10,000 MCP credential rows, half refused, checked in 0.8 s (SQLite), now reading only
  the rows whose variable is refused;
- W007 is only printed by ``manage.py`` (nothing renders ``run_checks`` in the console or API), for the platform;
- the refusal naming the tool whose ``Secret`` reads a variable reaches no tenant: a model provider's page is the
  platform's (``CrossTenantOnly``); a remote MCP credential's ``credential_env`` is read-only to tenant staff (only
  the platform adds one or names its variable, and a form leaves a read-only field unvalidated); the tools named are
  code tools (``registry.code_tools()``), registered for every tenant and listed in the catalogue every role reads,
  never a tenant's remote MCP tool; at most three are named, the rest counted;
- ``confusable_names._readings`` in NFKC: ASCII and NFKC names take the fast path; ``reads_as_existing`` over
  20,000 usernames (a third non-ASCII, 100 fullwidth) took 0.12-0.15 s with review m's change and 0.3-0.4 s
  without it (measured second on a loaded machine: no slower, the gap is noise); nothing is precomputed per user
  (only the confusables table, cached), so there is nothing to keep consistent;
- not in review m's scope, left as found: ``migrate toolhub 0001`` (backwards) fails in the post_migrate handler
  ``toolhub.apps._capability_permissions`` reading ``toolhub_toolgroup`` after its table was dropped.
"""

import pytest
from django.core import checks
from django.test import override_settings

from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer


@pytest.mark.django_db
def test_w007_names_a_bounded_number_of_rows_and_counts_the_rest() -> None:
    """Found: 300 tenants' MCP credentials named outside a newly set ``CREDENTIAL_ENV_PREFIXES`` gave 300 warnings at
    each ``check --database`` and ``migrate``.
    Expect: at most 25 named, in order, each with its row, variable and hint; one more warning counts the rest."""
    server = RemoteMcpServer.objects.create(name="crm", url="https://crm.example.com/mcp")
    RemoteMcpCredential.objects.bulk_create(
        [
            RemoteMcpCredential(server=server, tenant=f"t{index:03}", credential_env=f"CRM_TOKEN_T{index:03}")
            for index in range(300)
        ]
    )
    RemoteMcpCredential.objects.create(server=server, tenant="ok", credential_env="CRED_CRM_OK")
    with override_settings(TOOLHUB={"CREDENTIAL_ENV_PREFIXES": ["CRED_"]}):
        warnings = [message for message in checks.run_checks(databases=["default"]) if message.id == "toolhub.W007"]
    *named, rest = warnings
    assert len(named) == 25, len(warnings)
    assert str(named[0].obj) == "RemoteMcpCredential 'crm / t000'"
    assert "'CRM_TOKEN_T000'" in named[0].msg and "CRED_" in named[0].msg and named[0].hint
    assert rest.obj is None and "275 more" in rest.msg
    assert rest.hint and "check --database default" in rest.hint
    assert not any("ok" in str(message.obj) for message in warnings)
