"""The Slack shell. The rest of the bot uses one entry point: ``SlackRuntime``."""
