"""Importing this file raises, as a user's broken module would."""

raise ImportError("this module is broken on purpose")
