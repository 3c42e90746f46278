"""Sending the password-reset mail, when the operator configured SMTP (ARENA_SMTP_HOST).

Without SMTP nothing is sent and the reset link comes from an organizer or admin instead
(`arena user reset-link`, or the API). The mail holds the link only; it is sent after the
reset row is committed, so a mail that fails leaves a link nobody knows (harmless, it expires).
"""

from __future__ import annotations

import logging
import smtplib
from dataclasses import dataclass
from email.message import EmailMessage

log = logging.getLogger("arena.mail")


@dataclass(frozen=True)
class SmtpConfig:
    host: str
    port: int = 25
    sender: str = "arena@localhost"
    user: str = ""
    password: str = ""
    starttls: bool = False


def smtp_config(settings) -> SmtpConfig | None:
    """The SMTP settings, or None when mail is not configured."""
    if not settings.smtp_host:
        return None
    return SmtpConfig(settings.smtp_host, settings.smtp_port, settings.smtp_from,
                      settings.smtp_user, settings.smtp_password, settings.smtp_starttls)


def send_reset_mail(config: SmtpConfig, to: str, username: str, link: str) -> bool:
    """Mail the reset link; True when the server accepted it (failures are logged, not raised:
    the page answers the same either way, so it reveals nothing about the account)."""
    message = EmailMessage()
    message["From"], message["To"] = config.sender, to
    message["Subject"] = "MetaDL Arena: reset your password"
    message.set_content(f"Someone (hopefully you) asked to reset the password of the account "
                        f"{username!r}.\n\nOpen this link within a day to choose a new one:\n"
                        f"{link}\n\nIf it was not you, ignore this mail; nothing changes.\n")
    try:
        with smtplib.SMTP(config.host, config.port, timeout=10) as smtp:
            if config.starttls:
                smtp.starttls()
            if config.user:
                smtp.login(config.user, config.password)
            smtp.send_message(message)
        return True
    except (OSError, smtplib.SMTPException):
        log.exception("mail.reset.failed", extra={"to_domain": to.rpartition("@")[2]})
        return False
