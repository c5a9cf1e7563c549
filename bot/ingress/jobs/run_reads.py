"""Where the nightly job's reads of CI were: they are bot.service.run_reading now (a run read once, into
bot.domain.run_reading's values). `artifacts` is still imported from here by tests/integration/test_downloads.py."""

from bot.service.run_reading import artifacts

__all__ = ["artifacts"]
