"""The HTTP side: the Slack Events API endpoint, /healthz and the admin pages."""
