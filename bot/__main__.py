"""``python -m bot`` is the same as ``bot``."""

from bot.cli import main

main()
