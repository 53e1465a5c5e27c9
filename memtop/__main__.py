from memtop.cli import entry

entry()
