"""The scheduling engine: session, extension points, statement, policy, registry.

Pure and synchronous: a snapshot goes in, decisions (intents) come out. Nothing in this package,
in :mod:`caldera.actions` or in :mod:`caldera.plugins` imports kopf, kubernetes-asyncio or asyncio.
"""
