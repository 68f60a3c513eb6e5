"""Imported by the template: a forked child reports torch's bad-fork state."""

from tests.template_probes import pretend_bad_fork

pretend_bad_fork()
