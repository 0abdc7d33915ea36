"""Code the oTree apps share, in floors by concern (docs/ARCHITECTURE.md draws them): base,
server, shared_pages, agent_runtime, online, record, experimenter; above them all the oTree seam
(otree_patches/) and app_start.py, the apps' door. A floor imports only its own and those below.

Not an oTree app itself (apps are the root folders named in settings.SESSION_CONFIGS).
"""
