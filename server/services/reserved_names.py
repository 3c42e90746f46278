"""Account names nobody may take for themselves: names people read as the platform or its staff
("admin", "root", "support", "arena", ...), so that a participant who signs up first cannot pose
as staff, nor squat the name the admin bootstrap gives (issue 33.11).

A name is reserved when its `reserved_key` equals one of the reserved words': the uniqueness
key of services/names.py (NFKC, case, TR39 look-alikes), without separators and trailing
digits, with the digits people write for letters read as those letters ("Adm1n", "r00t",
"ADMIN_2", "arena-", "аdmin" with a Cyrillic а are all reserved). Sign-up and organizers obey
it; an admin may create such an account on purpose.
"""

from __future__ import annotations

from functools import lru_cache

from server.core.errors import InvalidInputError
from server.services.names import display_name, name_key

RESERVED = ("admin", "administrator", "admins", "root", "superuser", "sysadmin", "system",
            "organizer", "organiser", "organizers", "staff", "support", "helpdesk", "help",
            "moderator", "mod", "official", "owner", "security", "arena", "metadl",
            "metadl-arena", "platform", "operator", "webmaster", "postmaster", "hostmaster",
            "abuse", "noreply", "no-reply", "api", "internal", "anonymous", "null", "everyone")
_SEPARATORS = str.maketrans("", "", "_.- ")
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t",
                       "l": "i", "|": "i", "$": "s", "@": "a"})


def reserved_key(name: str) -> str:
    """The form two names share when one could pass for the other as a staff name."""
    shown = display_name(name).translate(_SEPARATORS)
    return name_key(shown.rstrip("0123456789") or shown).translate(_SEPARATORS).translate(_LEET)


@lru_cache(maxsize=1)
def _reserved_keys() -> frozenset[str]:
    return frozenset(reserved_key(word) for word in RESERVED)


def is_reserved(name: str) -> bool:
    return reserved_key(name) in _reserved_keys()


def check_not_reserved(name: str) -> None:
    """Raise InvalidInputError (`user.reserved_name`) when `name` reads as a reserved one."""
    if is_reserved(name):
        raise InvalidInputError(
            f"the username {name!r} is reserved: it reads as a name of the platform or its "
            "staff (admin, root, support, arena, ...); choose one that is yours, like 'ada_l'",
            code="user.reserved_name")
