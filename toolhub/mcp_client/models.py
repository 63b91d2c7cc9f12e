"""Remote MCP servers configured by administrators, their pinned tool definitions and per-tenant credentials.

Defined here and imported by ``toolhub.models`` (app label ``toolhub``).
"""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

from toolhub.conf import toolhub_settings
from toolhub.credential_env import credential_env_validator

__all__ = [
    "auth_scheme_validator",
    "MetaMode",
    "RemoteMcpCredential",
    "RemoteMcpServer",
    "RemoteMcpTool",
    "RemoteToolStatus",
    "Transport",
]


class Transport(models.TextChoices):
    STREAMABLE_HTTP = "streamable_http", "Streamable HTTP"


class MetaMode(models.TextChoices):
    """How a call's ``ToolContext`` reaches the server as ``_meta`` (reserved and secret keys never pass)."""

    NONE = "none", "Nothing"
    PASS_THROUGH = "pass_through", "Every key"
    ALLOW = "allow", "Only the listed keys"
    DENY = "deny", "Every key but the listed ones"


class RemoteMcpServer(models.Model):
    """A remote MCP server whose tools become the tool group ``name`` (provider ``mcp:<name>``).

    Nothing connects at startup: the server is contacted when an administrator fetches its tools and
    when one of its tools is called. A tool is callable only once an administrator accepted its definition.
    """

    name = models.SlugField(
        max_length=40, unique=True, help_text="Also the tool group's name and its tools' prefix ('<name>__<tool>')."
    )
    description = models.TextField(blank=True)
    url = models.URLField(max_length=500, help_text="The server's MCP endpoint, e.g. https://tools.example.com/mcp.")
    transport = models.CharField(max_length=30, choices=Transport.choices, default=Transport.STREAMABLE_HTTP)
    enabled = models.BooleanField(default=True)
    credential_required = models.BooleanField(
        default=True, help_text="Refuse calls for tenants without a credential reference for this server."
    )
    select_names = models.JSONField(default=list, blank=True, help_text="Only these remote tool names (exact).")
    select_regex = models.CharField(max_length=300, blank=True, help_text="Only remote tool names matching this.")
    select_predicate = models.CharField(
        max_length=200,
        blank=True,
        help_text="Dotted path of a function(tool: dict) -> bool deciding which remote tools to take.",
    )
    meta_mode = models.CharField(max_length=20, choices=MetaMode.choices, default=MetaMode.NONE)
    meta_keys = models.JSONField(default=list, blank=True, help_text="The keys for 'allow' or 'deny'.")
    risk = models.CharField(
        max_length=10,
        default="high",
        choices=[(r, r) for r in ("low", "medium", "high", "critical")],
        help_text="The risk of this server's tools; high and critical wait for an operator's approval.",
    )
    timeout_seconds = models.FloatField(default=30.0)
    unfold = models.BooleanField(
        default=False,
        help_text="Show the model one facade '<name>__tools' instead of every tool; calling it reveals them.",
    )
    unfold_notes = models.TextField(blank=True, help_text="Usage notes shown once the facade is unfolded.")
    synced_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)

    class Meta:
        verbose_name = "remote MCP server"

    def __str__(self) -> str:
        return self.name

    @property
    def capped_timeout(self) -> float:
        """The seconds a session with this server may last: its timeout within ``DEFAULT_TOOL_TIMEOUT_SECONDS``.

        The tool's own limit, the session's and a fetch's are this one: a session outliving the call it served
        would still reach the server after the call was recorded as stopped (and then run twice on a retry).
        The worker task's time limit always covers the default (``toolhub.tasks``).
        """
        return min(float(self.timeout_seconds), float(toolhub_settings().DEFAULT_TOOL_TIMEOUT_SECONDS))

    def clean(self) -> None:
        """A selection that cannot work, or a name another tool group holds, is refused when saved, not when fetched."""
        from toolhub.mcp_client.definitions import selection_problems, server_name_problem
        from toolhub.outbound_addresses import outbound_url_problem

        problems = selection_problems(regex=self.select_regex, predicate=self.select_predicate)
        if refused := outbound_url_problem(self.url):
            problems["url"] = refused
        if self.name and (taken := server_name_problem(self.name, provider=self.provider)):
            problems["name"] = taken
        if problems:
            raise ValidationError(problems)

    @property
    def provider(self) -> str:
        return f"mcp:{self.name}"


class RemoteToolStatus(models.TextChoices):
    PENDING = "pending", "Waiting for acceptance"
    ACTIVE = "active", "Accepted"
    QUARANTINED = "quarantined", "Changed since accepted (quarantined)"
    REMOVED = "removed", "No longer offered by the server"


class RemoteMcpTool(models.Model):
    """One remote tool: the definition an administrator accepted (pinned by hash) and the one last seen."""

    server = models.ForeignKey(RemoteMcpServer, on_delete=models.CASCADE, related_name="tools")
    remote_name = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=64, unique=True, help_text="The name in toolhub's registry.")
    status = models.CharField(max_length=20, choices=RemoteToolStatus.choices, default=RemoteToolStatus.PENDING)
    accepted_definition = models.JSONField(null=True, blank=True)
    accepted_hash = models.CharField(max_length=64, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    accepted_at = models.DateTimeField(null=True, blank=True)
    current_definition = models.JSONField(null=True, blank=True)
    current_hash = models.CharField(max_length=64, blank=True)
    seen_at = models.DateTimeField(null=True, blank=True)
    unusable_reason = models.CharField(
        max_length=500,
        blank=True,
        editable=False,
        help_text="Why the registry leaves this accepted tool out (recorded and audited by the registry); "
        "empty while it is offered.",
    )

    class Meta:
        verbose_name = "remote MCP tool"
        constraints = [models.UniqueConstraint(fields=["server", "remote_name"], name="remote_mcp_tool_once")]

    def __str__(self) -> str:
        return self.tool_name


#: An HTTP authentication scheme is one token (RFC 9110, 11.1 and 5.6.2: ``tchar``s, no space), or none at all.
#: The header's value is the scheme, one space and the credential: tenant staff, who may change the scheme,
#: must not put words of their own in front of the platform's token.
auth_scheme_validator = RegexValidator(
    r"\A[!#$%&'*+\-.^_`|~0-9A-Za-z]*\Z",
    # %% is a percent sign: Django fills the message in with the value (``%(value)s``).
    "An authentication scheme is one word of letters, digits and !#$%%&'*+-.^_`|~ (e.g. Bearer, Token), or empty.",
    code="invalid_scheme",
)


class RemoteMcpCredential(models.Model):
    """Which secret a tenant's calls to a server use: the NAME of an environment variable, never its value."""

    server = models.ForeignKey(RemoteMcpServer, on_delete=models.CASCADE, related_name="credentials")
    tenant = models.SlugField()
    credential_env = models.CharField(
        max_length=100,
        validators=[credential_env_validator],
        help_text="Name of the environment variable holding the token, e.g. CRM_MCP_TOKEN_ACME.",
    )
    header = models.CharField(max_length=100, default="Authorization")
    scheme = models.CharField(
        max_length=30,
        default="Bearer",
        blank=True,
        validators=[auth_scheme_validator],
        help_text="Prefix of the header's value: one word (Bearer, Token), or empty for the value alone.",
    )

    class Meta:
        verbose_name = "remote MCP credential"
        constraints = [models.UniqueConstraint(fields=["server", "tenant"], name="remote_mcp_credential_once")]

    def __str__(self) -> str:
        return f"{self.server} / {self.tenant}"
