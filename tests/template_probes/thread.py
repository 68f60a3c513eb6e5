"""Imported by the template: a thread that outlives the import."""

from tests.template_probes import start_thread

start_thread()
