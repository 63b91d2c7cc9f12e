"""What a verification of the audit trail found, and its kind. Django-free.

One vocabulary for ``verify_audit`` (``toolhub.audit_proof``) and the offline export verifier
(``toolhub.audit_file_verify``, which runs with no Django settings): ``TAMPERED`` is evidence the trail was
altered, ``UNVERIFIABLE`` that something could not be checked. Both fail a verification; only one is an accusation.
"""

from dataclasses import dataclass

__all__ = ["TAMPERED", "UNVERIFIABLE", "TrailProblem"]

#: A problem's kind: the trail (or a checkpoint, or an export's lines or header) was found altered, cut or missing.
TAMPERED = "TAMPERED"
#: A problem's kind: something could not be checked (the checkpoint key is not set in this process, an export's header
#: carries no signature the public key given can check). Still a failure (not proven), but not evidence of tampering.
UNVERIFIABLE = "UNVERIFIABLE"


@dataclass(frozen=True)
class TrailProblem:
    """One problem a verification found, with its kind: ``TAMPERED``, or ``UNVERIFIABLE`` (could not be checked)."""

    text: str
    kind: str = TAMPERED

    def __str__(self) -> str:
        return self.text

    @property
    def recorded(self) -> str:
        """As the console's record keeps it: what could not be checked says so, not to be read as tampering."""
        return f"cannot verify: {self.text}" if self.kind == UNVERIFIABLE else self.text
