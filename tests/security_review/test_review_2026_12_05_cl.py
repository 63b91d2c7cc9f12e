"""Review of 2026-12-05 (cl): the management commands as an operator runs them in production, mistakes included.

Findings (each test failed on the code as reviewed and passes now):
- ``audit_checkpoint -o FILE`` wrote over an existing file (an earlier checkpoint kept elsewhere, or any file the
  operator mistyped) and a directory or a missing folder as ``FILE`` ended in a traceback after the checkpoint was
  already stored; the file is now checked before anything is signed and written whole, never over a file.
- ``toolhub_roles`` (run by every ``load_demo`` too) set the role groups' permissions, stripping what an
  administrator had added, without a trail event; the admin's change of the same group appends
  ``governance.changed``. The command now appends the same event (nothing when nothing changed).
- ``load_demo`` created a superuser, staff, memberships, grants, a tenant, tool groups, providers and agents with
  no trail event (the admin records each as ``governance.added``); it now records them as the admin does.
- ``load_demo`` with the demo installed on a real database (``TOOLHUB_DEMO=1``) adopted existing people whose
  username is a demo one (``alice``, ``operator``, ...): it put them in acme, in the operators group and gave them
  the demo's money-movement permissions. It now refuses, changing nothing, when such a user is not a demo one.
- ``audit_export`` whose file could not be created (no permission) or written (a full disk) ended in a traceback;
  now a CommandError saying nothing was exported, with no file or partial file left.

Checked and holding (no test here): ``load_demo`` without DEBUG gives new demo users random passwords and leaves
existing passwords alone; a second run changes no password. ``verify_audit``: an unknown ``--tenant``, a
``--checkpoint`` that is a directory, missing, not JSON or not an object, ``--workers 0`` and a tampered trail all
exit non-zero with a message (CommandError, exit 1; argparse errors exit 2). ``audit_export``: an existing
output, a directory, a missing folder, an unknown tenant and malformed ``--from-seq``/``--since`` are refused
before anything is recorded; the file is written beside and renamed into place. ``toolhub_db_roles`` prints the
name of the password's variable, never the password. ``generate_calls`` refuses without the demo app.

Not fixed here: ``drf_create_token`` and ``axes_reset*`` (third-party commands) changed API tokens and login
lockouts without the ``governance.*`` event the admin's pages append; since fixed by review l
(``toolhub.governed_commands``, a model-less app placed before theirs). ``audit_export`` recorded ``audit.exported``
before the file was written, so a write that failed afterwards left the record (since review e:
``audit.export_started``, then the outcome).
``load_demo`` still moves global agents named like its own into acme (databases from before agents had
tenants) with a bulk update and no event; a broken pipe on stdout ends in Python's traceback.
"""

from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError

from toolhub.models import AuditCheckpoint, AuditEvent, TenantMembership


@pytest.mark.django_db
def test_audit_checkpoint_output_never_overwrites_a_file(audit_key: str, tmp_path: Path) -> None:
    """Found: ``audit_checkpoint -o kept.json`` replaced kept.json (the copy kept outside the database) silently.
    Expect: refused before signing, the file unchanged, no checkpoint stored."""
    kept = tmp_path / "kept.json"
    kept.write_text("the earlier checkpoint\n")
    with pytest.raises(CommandError, match="exists"):
        call_command("audit_checkpoint", "-o", str(kept), stderr=StringIO())
    assert kept.read_text() == "the earlier checkpoint\n"
    assert not AuditCheckpoint.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("where", ["directory", "missing folder"])
def test_audit_checkpoint_output_unwritable_is_a_clear_error(audit_key: str, tmp_path: Path, where: str) -> None:
    """Found: ``-o`` naming a directory or a file in a missing folder raised IsADirectoryError/FileNotFoundError
    (a traceback) after the checkpoint was stored. Expect: a CommandError before anything is signed or stored."""
    target = tmp_path if where == "directory" else tmp_path / "no-such-folder" / "c.json"
    with pytest.raises(CommandError):
        call_command("audit_checkpoint", "-o", str(target), stderr=StringIO())
    assert not AuditCheckpoint.objects.exists()
    assert not (tmp_path / "no-such-folder").exists()


@pytest.mark.django_db
def test_audit_checkpoint_output_is_written(audit_key: str, tmp_path: Path) -> None:
    """Found: (the counterpart of the two above) Expect: a new file is still written whole with the signature."""
    target = tmp_path / "c.json"
    call_command("audit_checkpoint", "-o", str(target), stderr=StringIO())
    assert '"signature"' in target.read_text()
    assert AuditCheckpoint.objects.count() == 1
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]  # no temporary left beside it


@pytest.mark.django_db
def test_toolhub_roles_records_what_it_changes() -> None:
    """Found: ``toolhub_roles`` set the operators group back to its list, removing a permission an administrator had
    added, with no trail event (the admin's group change appends ``governance.changed``).
    Expect: ``governance.changed`` for the group, naming the removed permission; a second run appends nothing."""
    call_command("toolhub_roles", verbosity=0)
    operators = Group.objects.get(name="operators")
    extra = Permission.objects.get(content_type__app_label="toolhub", codename="delete_grant")
    operators.permissions.add(extra)
    before = AuditEvent.objects.count()
    call_command("toolhub_roles", verbosity=0)
    events = list(AuditEvent.objects.filter(event_type="governance.changed").order_by("id"))
    assert len(events) == 1, events
    assert events[0].payload["model"] == "auth.group" and events[0].payload["object"] == "operators"
    assert "toolhub.delete_grant" in str(events[0].payload["changes"])
    assert events[0].actor.startswith("command:")
    count = AuditEvent.objects.count()
    assert count == before + 1
    call_command("toolhub_roles", verbosity=0)
    assert AuditEvent.objects.count() == count


@pytest.mark.django_db
def test_load_demo_does_not_adopt_real_people() -> None:
    """Found: with the demo installed on a real database, ``load_demo`` made an existing person named ``alice``
    (not a demo user) a member of acme with the demo's money-movement permissions, and ``operator`` an operator.
    Expect: refused naming them, nothing changed (no acme membership, no group, no permission, no demo data)."""
    real_alice = User.objects.create_user("alice", email="alice@corp.example.org", password="her own 9f2!x")
    real_operator = User.objects.create_user("operator", email="op@corp.example.org", password="own pw 7%kq")
    with pytest.raises(CommandError, match="alice"):
        call_command("load_demo", stdout=StringIO())
    for person in (real_alice, real_operator):
        person = User.objects.get(pk=person.pk)
        assert not TenantMembership.objects.filter(user=person).exists()
        assert not person.groups.exists()
        assert not person.user_permissions.exists()
    assert not User.objects.filter(username="admin").exists()


@pytest.mark.django_db
def test_load_demo_runs_again_over_its_own_users() -> None:
    """Found: (the counterpart) Expect: a second load over the demo's own users (random passwords) still works."""
    call_command("load_demo", stdout=StringIO())
    out = StringIO()
    call_command("load_demo", stdout=out)
    assert "Demo data loaded" in out.getvalue()


@pytest.mark.django_db
def test_load_demo_records_the_people_and_grants_it_adds() -> None:
    """Found: ``load_demo`` (installed on a real stack with ``TOOLHUB_DEMO=1``) created a superuser, five staff and
    plain users, a tenant, acme memberships and grants, tool groups, model providers and agents with no trail
    event; the admin records each as ``governance.added``. Expect: ``governance.added`` for each (no password hash
    in a user's), in the tenant's chain for acme's rows; a second load adds none."""
    call_command("load_demo", stdout=StringIO())
    added = list(AuditEvent.objects.filter(event_type="governance.added"))
    models = [event.payload["model"] for event in added]
    assert models.count("auth.user") == 6
    assert models.count("toolhub.tenantmembership") == 6
    assert models.count("toolhub.grant") == 3
    assert models.count("toolhub.tenant") == 1 and models.count("toolhub.toolgroup") == 3
    assert models.count("agents_app.agent") == 4 and models.count("agents_app.modelprovider") == 1  # openai-local
    admin = next(e for e in added if e.payload["model"] == "auth.user" and e.payload["object"] == "admin")
    assert admin.payload["values"]["is_superuser"] is True and "password" not in admin.payload["values"]
    assert User.objects.get(username="admin").password not in str([e.data for e in added])
    assert {e.tenant for e in added if e.payload["model"] == "toolhub.grant"} == {"acme"}
    count = AuditEvent.objects.count()
    call_command("load_demo", stdout=StringIO())
    assert AuditEvent.objects.count() == count


@pytest.mark.django_db
@pytest.mark.parametrize("failure", ["no permission", "disk full"])
def test_audit_export_write_failure_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    """Found: an export whose file could not be created (no write permission on the folder) or written (a full
    disk) ended in a PermissionError/OSError traceback. Expect: a CommandError saying nothing was exported, no
    file and no partial file left."""
    import errno

    from toolhub import audit_export as service
    from toolhub import new_files
    from toolhub.audit import audit_append
    from toolhub.models import Tenant

    Tenant.objects.create(slug="acme", name="ACME")
    audit_append(event_type="x.y", actor="a", data={}, tenant="acme")
    if failure == "no permission":

        def refused(*args: object, **kwargs: object) -> None:
            raise PermissionError(errno.EACCES, "Permission denied")

        monkeypatch.setattr(new_files.tempfile, "mkstemp", refused)
    else:
        real = service.audit_export_lines

        def full(export: object):  # type: ignore[no-untyped-def]
            yield next(iter(real(export)))
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(service, "audit_export_lines", full)
    with pytest.raises(CommandError, match="nothing was exported"):
        call_command("audit_export", "--tenant", "acme", "-o", str(tmp_path / "acme.jsonl"), stdout=StringIO())
    assert list(tmp_path.iterdir()) == []
