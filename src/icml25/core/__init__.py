"""Shared machinery: config, registry, io, provenance, tracking, downloads. Light imports only."""
