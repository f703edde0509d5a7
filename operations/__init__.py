"""Operations layer: the ``radctl`` CLI, stack start/stop, the quickstart, the local cluster
launchers and the composition of the serving process. It may import every layer; nothing imports it.
"""
