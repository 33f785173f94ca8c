"""Delivering escalations by e-mail, through the host's ``sendmail`` (exim4, msmtp, postfix).

One message per escalation, to every recipient, handed to ``sendmail -t -oi`` on stdin: the
mail system delivers or queues it, and its exit code says whether it took the message. A
non-zero exit, a program that cannot start, or one still running at the timeout means not
delivered, and the supervisor offers the escalation again after the next pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from email.message import EmailMessage

from dispatch.channel_names import mail_name
from dispatch.model.status import Escalation
from dispatch.model.values import JobID
from dispatch.supervise.deliver_command import run_delivery
from dispatch.supervise.delivery import Timed, message

# Debian's path of the sendmail interface (exim4, msmtp-mta and postfix all install it).
SENDMAIL = ("/usr/sbin/sendmail",)


class MailDeliver(Timed):
    """A ``Deliver`` that mails each escalation to ``to`` through ``sendmail``."""

    def __init__(
        self, to: Sequence[str], timeout: timedelta, sendmail: Sequence[str] = SENDMAIL
    ) -> None:
        if not to:
            raise ValueError("mail delivery needs at least one address")
        self.to, self.sendmail, self.timeout = tuple(to), tuple(sendmail), timeout
        self.via = mail_name(self.to)

    def render(self, job: JobID, escalation: Escalation) -> bytes:
        """The message as ``sendmail -t`` reads it: headers, a blank line, the text."""
        mail = EmailMessage()
        mail["To"] = ", ".join(self.to)
        # A header is one line: any control character of the id is shown as a space.
        subject = f"dispatch job {job}: escalation {escalation.id}"
        mail["Subject"] = "".join(c if c.isprintable() else " " for c in subject)
        mail.set_content(message(job, escalation) + "\n")
        return mail.as_bytes()

    def __call__(self, job: JobID, escalation: Escalation) -> None:
        """Hand the message to sendmail; ``UnavailableError`` unless it exits 0."""
        run_delivery(
            f"sendmail ({self.sendmail[0]})",
            [*self.sendmail, "-t", "-oi"],
            self.render(job, escalation),
            self.timeout,
        )
