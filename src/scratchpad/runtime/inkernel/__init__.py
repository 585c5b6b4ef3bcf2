"""Code that runs inside a pad's kernel process: standard library only at boot.

``worker.py`` is started by file path (so nothing of the scratchpad package is imported at
boot); it imports ``protocol.py`` beside it and loads the helpers, the matplotlib backend and
the LLM bridge on first use under private module names.
"""
