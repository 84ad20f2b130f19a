"""Small helpers every layer may use: clocks, asyncio task helpers, logging set-up."""
