"""Code the oTree apps share: session settings, matching, texts, exports, agent runtime.

Not an oTree app itself (apps are the root folders named in settings.SESSION_CONFIGS).
"""
