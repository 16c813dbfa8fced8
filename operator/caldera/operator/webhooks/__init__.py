"""The admission webhooks, served through kopf: handlers, server, certificate, configurations."""
