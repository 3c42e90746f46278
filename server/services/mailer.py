"""Sending the password-reset mail, when the operator configured SMTP (ARENA_SMTP_HOST).

Without SMTP nothing is sent and the reset link comes from an admin (or, for the accounts
they created, an organizer) instead: `POST /api/v1/users/{id}/reset-link`. With SMTP, sign-up
also mails the link that verifies the address (services/email_verification.py). A mail holds
the link only; it is sent after the change is committed, so a mail that fails leaves a link
nobody knows (harmless: a reset link expires, a verification link can be mailed again).
"""

from __future__ import annotations

import logging
import smtplib
from dataclasses import dataclass
from email.message import EmailMessage

from server.core.config import Settings

log = logging.getLogger("arena.mail")


@dataclass(frozen=True)
class SmtpConfig:
    host: str
    port: int = 25
    sender: str = "arena@localhost"
    user: str = ""
    password: str = ""
    starttls: bool = False


def smtp_config(settings: Settings) -> SmtpConfig | None:
    """The SMTP settings, or None when mail is not configured."""
    if not settings.smtp_host:
        return None
    return SmtpConfig(settings.smtp_host, settings.smtp_port, settings.smtp_from,
                      settings.smtp_user, settings.smtp_password, settings.smtp_starttls)


def send_reset_mail(config: SmtpConfig, to: str, username: str, link: str) -> bool:
    """Mail the reset link; True when the server accepted it (failures are logged, not raised:
    the page answers the same either way, so it reveals nothing about the account)."""
    return send_mail(config, to, "MetaDL Arena: reset your password",
                     f"Someone (hopefully you) asked to reset the password of the account "
                     f"{username!r}.\n\nOpen this link within a day to choose a new one:\n"
                     f"{link}\n\nIf it was not you, ignore this mail; nothing changes.\n")


def send_verify_mail(config: SmtpConfig, to: str, username: str, link: str) -> bool:
    """Mail the link that verifies a new account's address (failures logged, not raised)."""
    return send_mail(config, to, "MetaDL Arena: verify your e-mail address",
                     f"Welcome to MetaDL Arena, {username}.\n\nOpen this link to verify your "
                     f"address; you can take part in competitions once it is verified:\n"
                     f"{link}\n\nIf you did not sign up, ignore this mail.\n")


def send_mail(config: SmtpConfig, to: str, subject: str, body: str) -> bool:
    """Send one plain-text mail; True when the SMTP server accepted it."""
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = config.sender, to, subject
    message.set_content(body, cte="8bit")  # not quoted-printable: a long link stays whole
    try:
        with smtplib.SMTP(config.host, config.port, timeout=10) as smtp:
            if config.starttls:
                smtp.starttls()
            if config.user:
                smtp.login(config.user, config.password)
            smtp.send_message(message)
        return True
    except (OSError, smtplib.SMTPException):
        log.exception("mail.failed", extra={"to_domain": to.rpartition("@")[2]})
        return False
