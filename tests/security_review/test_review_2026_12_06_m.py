"""Review 2026-12-06 (m): reviewing reviews f and b (credential references, URL secrets, usernames) for regressions.

Findings (each fails on dfe435b, passes after the fix):

1. An upgrade silently broke saved rows: a model provider or remote MCP credential saved before review f that names a
   variable now refused (``OPENAI_API_KEY`` once a tool's ``Secret("OPENAI_API_KEY")`` reads it, ``AWS_*``) failed
   each run or call "not configured" with nothing at deploy time saying which row; now ``manage.py check --database
   default`` (and ``migrate``) warns ``toolhub.W007`` naming the row, its variable, why, and what to do.
2. The refusal did not say which rule refused the name: a developer whose provider reads ``OPENAI_API_KEY`` was told
   every prefix and name of the platform and "or one a registered tool's Secret preset reads", not that tool
   ``x``'s preset reads it, nor that the same key under a variable of the endpoint's own is the way out.
3. ``username_problem`` read the chosen name as stored (NFKC, review b) but the existing accounts as written: beside an
   account saved by code or an import as ``ａｄｍｉｎ`` (fullwidth), ``admin`` was accepted; ``confusable_names`` now
   reads every name in its NFKC form too (the rule both ways), at no measurable cost over 20,000 names.

Checked and holds:
- ``registry.code_tools()`` where ``credential_env_problem`` calls it: an in-memory read of the tools registered by
  ``ToolhubConfig.ready`` (web and workers alike, the same autodiscovery; a tool module that fails to import fails
  startup, not this read); migrations 0013 (agents_app) and 0035 (toolhub) only reference the validator (migrations
  run no field validators) and ``toolhub.credential_env`` imports no model at module level; the cost per read is a
  sort of the registered tools (microseconds beside a model call), no cache needed (a cache would outlive
  ``registry.temporarily``);
- a refused row fails the run "Model provider 'x' is not configured; ask an administrator" (sanitized, no variable)
  and logs which variable and why (``credential_from_env``); an MCP call fails "not configured" naming only the
  variable; the row's admin page refuses the name when it is saved again;
- the rule stays as review f made it (a tool's ``Secret`` variable is the platform's key to that service, and a
  provider's base URL is any host its administrators type); the README says so and names the way out;
- ``url_secrets`` with ``/`` in the alphabet: ``/v1/chat/completions``, ``/a%2Fb/``, ``acme%2Fbilling``, Azure
  ``deployments/gpt-4o-mini``, ``llama3.1:8b``, a short base64 id are kept; only a decoded segment of 16 or more
  token characters with a digit is redacted, as the same segment without ``%2F`` already was (``gpt-4o-mini-2024-07-18``
  and ``docs-2024-report.pdf`` were redacted before review f too: the heuristic's choice, not a regression);
- usernames: ``username_problem`` reads the NFKC form; renaming a legacy account to its own NFKC form passes
  (``other_than`` excludes the account itself); ``load_demo`` run twice on a fresh SQLite database (``make run``'s
  ``migrate`` then ``load_demo``, DJANGO_DEBUG=1) loads both times; with 20,000 users (SQLite, a loaded machine)
  one ``username_problem`` took 0.5 s and ``load_demo``'s six scans (``_not_demo_users``) 2.7 s, once per load;
  the caseless-capital-I reading adds a translate per name and a skeleton only for names holding such a letter.
"""

import pytest
from django.contrib.auth import get_user_model
from django.core import checks

from agents_app.models import ModelProvider, ProviderKind
from toolhub import Secret, registry, tool
from toolhub.admin_usernames import username_problem
from toolhub.confusable_names import reads_as_existing
from toolhub.credential_env import credential_env_problem
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer


@tool(presets={"api_key": Secret("OPENAI_API_KEY")})
def review_m_embed(text: str, api_key: str) -> str:
    """Embed a text with the platform's own OpenAI key."""
    return text


def _credential_warnings() -> list[checks.CheckMessage]:
    return [message for message in checks.run_checks(databases=["default"]) if message.id == "toolhub.W007"]


@pytest.mark.django_db
def test_a_saved_row_naming_a_now_refused_variable_is_reported_at_deploy_time() -> None:
    """Found: a provider or MCP credential saved before review f, naming a variable now refused (a tool's Secret
    reads it, a cloud credential), failed every run "not configured" and no check said so at deploy time.
    Expect: ``check --database`` warns toolhub.W007 per row, naming the row, the variable and a hint."""
    # Saved before the rule (``create`` runs no validators, as rows of an older release were saved).
    ModelProvider.objects.create(
        name="openai-prod", kind=ProviderKind.OPENAI, model_name="gpt-4o", credential_env="OPENAI_API_KEY"
    )
    server = RemoteMcpServer.objects.create(name="crm", url="https://crm.example.com/mcp")
    RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="AWS_SECRET_ACCESS_KEY")
    ModelProvider.objects.create(name="ollama", kind=ProviderKind.OPENAI, model_name="llama3", credential_env="OK_KEY")
    with registry.temporarily(review_m_embed):
        warnings = _credential_warnings()
    assert len(warnings) == 2, warnings
    provider, credential = sorted(warnings, key=lambda message: str(message.obj))
    assert "openai-prod" in str(provider.obj) and "OPENAI_API_KEY" in provider.msg
    assert "review_m_embed" in provider.msg
    assert "crm / acme" in str(credential.obj) and "AWS_SECRET_ACCESS_KEY" in credential.msg
    assert provider.hint and "not configured" in provider.hint
    # Without the tool, the provider's variable is an ordinary one again; no check without --database.
    assert [str(message.obj) for message in _credential_warnings()] == [str(credential.obj)]
    assert not [message for message in checks.run_checks() if message.id == "toolhub.W007"]


def test_the_refusal_says_which_rule_refused_the_name_and_the_way_out() -> None:
    """Found: ``OPENAI_API_KEY``, read by a tool's Secret preset, was refused with the platform's whole list of
    prefixes and names, not the tool that reads it nor what to do.
    Expect: the message names the tool whose preset reads it and says to give the endpoint a variable of its own."""
    with registry.temporarily(review_m_embed):
        problem = credential_env_problem("openai_api_key")
    assert problem is not None
    assert "review_m_embed" in problem
    assert "DJANGO_" not in problem  # not the rules that did not refuse it
    assert "of its own" in problem
    prefix = credential_env_problem("DJANGO_SECRET_KEY")
    assert prefix is not None and "DJANGO_" in prefix
    cloud = credential_env_problem("aws_session_token")
    assert cloud is not None and "AWS_SESSION_TOKEN" in cloud


@pytest.mark.django_db
def test_an_account_stored_in_compatibility_letters_is_read_as_drawn_when_a_name_is_chosen() -> None:
    """Found: ``username_problem`` reads the chosen name as stored (NFKC) but the existing accounts as written: an
    account saved by code or an import as ``ａｄｍｉｎ`` (fullwidth, drawn as admin) let ``admin`` be added beside it.
    Expect: existing names are read in their NFKC form too (the rule goes both ways); other names stay accepted."""
    legacy = get_user_model().objects.create(username="\uff41\uff44\uff4d\uff49\uff4e", email="legacy@corp.example")
    problem = username_problem("admin")
    assert problem is not None and "\uff41\uff44\uff4d\uff49\uff4e" in problem
    assert reads_as_existing("Admin") == legacy.username
    # Renaming the account to its own stored form passes (``other_than``), and an unrelated name is accepted.
    assert username_problem("admin", other_than=legacy.pk) is None
    assert username_problem("bob") is None
