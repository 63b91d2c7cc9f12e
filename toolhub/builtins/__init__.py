"""Built-in file and shell tools (AgentScope's), confined to a tenant's workspace and off until granted.

Add ``"toolhub.builtins.apps.BuiltinsConfig"`` to ``INSTALLED_APPS`` to register them; a grant then
lets a user, group or tenant use them (README "Built-in tools").
"""
