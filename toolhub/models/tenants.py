"""Tenants and who belongs to them; a tenant's slug is its identity wherever a row names it."""

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models.signals import post_delete
from django.dispatch import receiver


def refuse_identity_change(instance: models.Model, field: str) -> None:
    """Refuse saving ``instance`` with another ``field`` than stored: other rows and the code name it by that value.

    A rename would leave them naming nothing (or, once the old value is taken again, someone else).
    """
    from django.core.exceptions import ValidationError

    if instance.pk is None:
        return
    stored = type(instance)._default_manager.filter(pk=instance.pk).values_list(field, flat=True).first()
    if stored is not None and stored != getattr(instance, field):
        label = type(instance)._meta.verbose_name
        raise ValidationError(
            {field: f"A {label}'s {field} cannot change once it exists (rows name it {stored!r}); keep {stored!r}."}
        )


class Tenant(models.Model):
    """A customer or organisation whose data tools act on; runs carry exactly one.

    The slug is the tenant's identity wherever a row names it (calls, runs, approval requests, audit events and
    chains, sagas, remote MCP credentials, the built-in tools' workspace directory): it never changes once the
    tenant exists, and a deleted tenant's slug is retired (``RetiredTenantSlug``), never issued again, so no
    tenant reaches another's rows by taking its name.
    """

    #: Fixed once the row exists (``refuse_identity_change``; the admin shows them read-only on a change).
    identity_fields = ("slug",)

    slug = models.SlugField(unique=True, help_text="Fixed once the tenant exists: every row of the tenant names it.")
    name = models.CharField(max_length=200)
    #: The first of this tenant's audit chains (``toolhub.audit_hash.tenant_chain_base``), derived from the
    #: slug; unique, so no two tenants' events can share a chain (NULL only for an older tenant whose slug
    #: collided when this column was added).
    audit_chain_base = models.PositiveBigIntegerField(unique=True, null=True, editable=False)

    class Meta:
        # At most 50 characters: ``auth 0001``'s column, which migrating auth back narrows ``name`` to again.
        permissions = [("cross_tenant", "Can act on every tenant's data (platform team)")]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        """Refuse a changed slug, a retired one, another's but for case, or one whose audit chains are another's."""
        from django.core.exceptions import ValidationError

        from toolhub.audit_hash_core import tenant_chain_base

        self._refuse_another_identity()
        base = tenant_chain_base(self.slug)
        if Tenant.objects.filter(audit_chain_base=base).exclude(pk=self.pk).exists():
            raise ValidationError(
                {"slug": "This slug's audit chains would coincide with another tenant's; choose another."}
            )

    def save(self, *args: Any, **kwargs: Any) -> None:
        from toolhub.audit_hash_core import tenant_chain_base

        self._refuse_another_identity()
        self.audit_chain_base = tenant_chain_base(self.slug)
        super().save(*args, **kwargs)

    def _refuse_another_identity(self) -> None:
        """A slug stays its tenant's: never changed, never reused once retired, never another's but for case.

        Slugs equal but for case read alike to people, and name one directory on a case-insensitive disk.
        """
        from django.core.exceptions import ValidationError

        from toolhub.audit_hash_core import tenant_chain_base

        refuse_identity_change(self, "slug")
        if Tenant.objects.filter(pk=self.pk).exists():
            return
        if Tenant.objects.filter(slug__iexact=self.slug).exclude(slug=self.slug).exists():
            raise ValidationError(
                {
                    "slug": "Another tenant's slug differs from this one only in case: people would take one for the "
                    "other, and a case-insensitive disk gives both one workspace. Choose another."
                }
            )
        retired = models.Q(slug__iexact=self.slug) | models.Q(audit_chain_base=tenant_chain_base(self.slug))
        if RetiredTenantSlug.objects.filter(retired).exists():
            raise ValidationError(
                {
                    "slug": "This slug (or its audit chains) belonged to a deleted tenant whose rows still name it; "
                    "choose another."
                }
            )


class RetiredTenantSlug(models.Model):
    """The slug of a deleted tenant: its calls, runs, audit events and files still name it, so no tenant takes it."""

    slug = models.SlugField(unique=True)
    audit_chain_base = models.PositiveBigIntegerField(null=True, editable=False)
    retired_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.slug


@receiver(post_delete, sender=Tenant)
def _retire_slug(sender: type[Tenant], instance: Tenant, **kwargs: Any) -> None:
    """Retire a deleted tenant's slug, whatever deleted it (a page, a bulk action, a cascade)."""
    RetiredTenantSlug.objects.get_or_create(
        slug=instance.slug, defaults={"audit_chain_base": instance.audit_chain_base}
    )


class TenantMembership(models.Model):
    """Which tenants a user may act for; the boundary picks the run's tenant from these, never the model."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tenant_memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "tenant"], name="unique_tenant_membership")]

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant}"
