"""The plugin API.

Statuses, cycle state, extension points, sessions, statements, decisions, registries, handles.
"""
