"""The asyncio face: the mirror image of _sync, plus aiosqlite's loop."""
