"""Imported by the template: torch reports CUDA initialized."""

from tests.template_probes import pretend_cuda_initialized

pretend_cuda_initialized()
