"""Copy-on-write write path: prepare, tag/assign, write file groups, commit (see ``client``)."""
