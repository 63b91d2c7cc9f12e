"""Review of 2026-12-05 (ck): the regression review of the last landed changes (export signing with a public key,
the login pair lock, agentic inner calls as saga steps, the editable list's scoped row ids, the prepared cursor).

Each test failed on the reviewed code (main at d9f902f) and passes now.

Findings:

1. The export verifier took any 32 bytes as a public key: under a point of small order (the identity ``01 00..00``,
   the order-4 point ``00..00``, their non-canonical spellings with y >= p or the sign bit set) a header signed
   with R = that point and s = 0 (no secret at all) verified, and ``audit_file_verify`` answered "the header is
   signed by the public key given", exit 0, for a rewritten file. OpenSSL's Ed25519 checks none of this. Keys whose
   y is one of the eight small-order points' (RFC 8032's cofactor 8) or not canonical (y >= p) are now refused in
   ``toolhub.audit_export_key`` (``parse_public_key``: a usage error; ``header_signature_problem``: a problem, for
   callers that pass a key object). The list is checked here with Edwards arithmetic written from RFC 8032, not
   taken on trust: each y decodes to points of order dividing 8, and together they are all eight.

Checked and holding (no test here):
- Export signing: rotating the checkpoint key changes the public key and the verifier names the key the header
  says signed it against the one given (an old file verifies with the public key of its time); the console shows
  the public key only to those who may export (tenant auditor or platform alike: base64, hex, fingerprint, never
  the checkpoint key or the HMAC); malformed keys, key files and signatures are answered in words, exit 1 or 2
  (review cj's tests); a lying unsigned ``signature.key`` only words the failure message, a good signature verifies
  whatever it names; ``s + L`` (a malleated signature) is refused by OpenSSL; the verifier imports no Django
  (review cj's subprocess test, run here again).
- Login pair lock: no ``ATOMIC_REQUESTS``; no caller runs it inside an outer transaction; an exception in
  ``authenticate`` rolls the transaction back and lets the advisory lock (transaction-level) or the stripe go;
  ``GuardedAuthenticationForm.clean`` is Django 5.2's ``AuthenticationForm.clean`` with the serialized call
  (inactive users: ``ModelBackend`` returns None, the same "invalid login" message; ``confirm_login_allowed``
  kept); the session login and axes' ``AccessLog`` and reset run after the lock, on a password already proven;
  the lock is taken for the typed name before any read, and Django's backend hashes for unknown names.
- Inner calls as saga steps: ``STEP_KINDS`` is used only by the sagas (steps, recording, ignoring); run pages,
  counts and budgets filter on their own kinds; ``_outer_row`` reads worker and saga id in the one query that read
  the worker before; compensations run in reverse order of completion, the outer's before its inner steps'.
- ``TenantScopedAdmin.get_changelist_formset``: the row-id field's queryset is the admin's ``get_queryset``
  (as Django's own ``_get_list_editable_queryset``, not the page or the filters), a superuser's being every row;
  it is a subquery of the per-form lookup Django already makes: no query added.
- ``prepared_cursor`` resolves ``django.db.connection`` to ``connections[alias]`` (the same wrapper per thread);
  ``rowread``'s ``DEFAULT_DB_ALIAS`` is what ``connection.alias`` always was (one database, no routers).
"""

import base64
import io
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.core.management import call_command

from tests.security_review import test_review_2026_12_05_cj as cj
from toolhub import audit_export_key
from toolhub.audit_export_key import PublicKeyError, header_signature_problem, parse_public_key

pytestmark = pytest.mark.django_db

#: Review cj's fixtures: a trail of acme's, and the checkpoint key set.
trail = cj.trail
key = cj.key

# --- Edwards arithmetic from RFC 8032 (sections 5.1 and 5.1.3), to check the refused list by computing -----------

P = 2**255 - 19
D = -121665 * pow(121666, -1, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)
IDENTITY = (0, 1)
#: RFC 8032's base point B (section 5.1): its order is the prime L, so [8]B is not the identity.
BASE = (
    15112221349535400772501151409588531511454012693041857206046113283949847762202,
    46316835694926478169428394003475163141307993866256225615783033603165251855960,
)


def on_curve(point: tuple[int, int]) -> bool:
    x, y = point
    return (-x * x + y * y - 1 - D * x * x * y * y) % P == 0


def add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """Twisted Edwards addition with a = -1 (complete on this curve)."""
    (x1, y1), (x2, y2) = a, b
    t = D * x1 * x2 * y1 * y2 % P
    return ((x1 * y2 + x2 * y1) * pow(1 + t, -1, P) % P, (y1 * y2 + x1 * x2) * pow(1 - t, -1, P) % P)


def times_eight(point: tuple[int, int]) -> tuple[int, int]:
    for _ in range(3):
        point = add(point, point)
    return point


def points_with_y(y: int) -> list[tuple[int, int]]:
    """The curve's points with this y (RFC 8032 5.1.3's recovery of x, both signs): none, one (x = 0) or two."""
    u, v = (y * y - 1) % P, (D * y * y + 1) % P
    x = u * pow(v, 3, P) * pow(u * pow(v, 7, P), (P - 5) // 8, P) % P
    if (v * x * x - u) % P:
        x = x * SQRT_M1 % P
    if (v * x * x - u) % P:
        return []
    return sorted({(x, y), ((P - x) % P, y)})


def encoding(y: int, negative_x: bool = False) -> bytes:
    return (y | (negative_x << 255)).to_bytes(32, "little")


# --- 1. degenerate public keys ------------------------------------------------------------------------------------


def test_the_refused_ys_are_exactly_the_eight_points_of_small_order() -> None:
    """Found: no small-order key was refused. Expect: the list of refused y coordinates names points of order
    dividing 8 only (computed here from RFC 8032's curve, not trusted), eight points in all: the whole torsion
    group of a curve of cofactor 8; the base point (order L) is no such point and its key is not refused."""
    assert on_curve(BASE) and times_eight(BASE) != IDENTITY
    points = [point for y in audit_export_key._SMALL_ORDER_Y for point in points_with_y(y)]
    assert len(points) == 8 == len(set(points))
    for point in points:
        assert on_curve(point) and times_eight(point) == IDENTITY, point
    assert audit_export_key._degenerate_key_problem(encoding(BASE[1], negative_x=bool(BASE[0] & 1))) is None


#: (a small-order public key's encoding, the R with s = 0 that forges every message under it)
FORGERIES = {
    "identity": (encoding(1), encoding(1)),
    "order 4 (32 zero bytes)": (encoding(0), encoding(0)),
    "identity, y + p": (encoding(P + 1), encoding(1)),
    "identity, x's sign bit set": (encoding(1, negative_x=True), encoding(1)),
}


@pytest.mark.parametrize("name", FORGERIES)
def test_a_small_order_public_key_is_refused_and_forges_nothing(
    name: str, trail: None, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: a header rewritten at will and "signed" with R = a small-order point and s = 0 verified under that
    point as public key (exit 0, "signed by the public key given"). Expect: such a key is a usage error naming
    the problem (exit 2, no traceback), from the command line and from a key file, and a key object passed to
    ``header_signature_problem`` is refused as well."""
    public_raw, r = FORGERIES[name]
    exported = tmp_path / "out.jsonl"
    call_command("audit_export", "--tenant", "acme", "-o", str(exported), stdout=io.StringIO())

    def forge(header: dict) -> None:
        header["exported_at"] = "2020-01-01T00:00:00+00:00"
        header["signature"]["value"] = base64.b64encode(r + bytes(32)).decode()

    forged = cj.rewrite(exported, tmp_path / "forged.jsonl", forge)
    header = json.loads(forged.read_text(encoding="utf-8").splitlines()[0])
    given = base64.b64encode(public_raw).decode()
    key_file = tmp_path / "small.pub"
    key_file.write_text(f"# a key\n{public_raw.hex()}\n", encoding="utf-8")

    for argv in (["--public-key", given], ["--public-key", public_raw.hex()], ["--public-key-file", str(key_file)]):
        code, output = cj.verified(capsys, str(forged), *argv)
        assert code == 2 and "not a usable Ed25519 public key" in output, (argv, output)
        assert "signed by the public key given" not in output and "Traceback" not in output
    with pytest.raises(PublicKeyError, match="small order"):
        parse_public_key(given)
    problem = header_signature_problem(Ed25519PublicKey.from_public_bytes(public_raw), header)
    assert problem is not None and "not a usable Ed25519 public key" in problem.text
