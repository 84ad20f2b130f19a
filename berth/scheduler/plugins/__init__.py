"""In-tree plugins, one module each; :mod:`.registry` is the only module that imports them all."""
