"""The core records of the ``toolhub`` app, one module per job.

``tenants``: tenants and their members; ``calls``: the tool catalogue and governed calls; ``audit``: the
hash-chained trail; ``governance``: tool groups, grants and the governance stamp; ``tokens``: API tokens' latest
use. Every model is imported from here (``from toolhub.models import ToolCall``), as Django and the rest of the
code expect.
"""

# The remote MCP models are defined beside their services and registered under this app.
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool
from toolhub.models.audit import AuditChainHead, AuditCheckpoint, AuditEvent, AuditVerification
from toolhub.models.calls import (
    ENDED_STEP_STATUSES,
    ROLLBACK_KINDS,
    SAGA_STEPS,
    SETTLED_STATUSES,
    STEP_KINDS,
    CallIdempotencyKey,
    CallKind,
    CallStatus,
    RiskLevel,
    ToolCall,
    ToolCallArtifact,
    ToolDefinition,
    is_saga_step,
    is_undoing,
    undoing,
)
from toolhub.models.governance import GovernanceVersion, Grant, GrantEffect, ToolGroup
from toolhub.models.tenants import RetiredTenantSlug, Tenant, TenantMembership, refuse_identity_change
from toolhub.models.tokens import ApiTokenBinding, ApiTokenUse

__all__ = [
    "SETTLED_STATUSES",
    "ENDED_STEP_STATUSES",
    "ROLLBACK_KINDS",
    "SAGA_STEPS",
    "STEP_KINDS",
    "is_saga_step",
    "is_undoing",
    "undoing",
    "ApiTokenBinding",
    "ApiTokenUse",
    "AuditChainHead",
    "AuditCheckpoint",
    "AuditEvent",
    "AuditVerification",
    "CallIdempotencyKey",
    "CallKind",
    "CallStatus",
    "GovernanceVersion",
    "Grant",
    "GrantEffect",
    "RemoteMcpCredential",
    "RemoteMcpServer",
    "RemoteMcpTool",
    "RetiredTenantSlug",
    "RiskLevel",
    "Tenant",
    "TenantMembership",
    "ToolCall",
    "ToolCallArtifact",
    "ToolDefinition",
    "ToolGroup",
    "refuse_identity_change",
]
