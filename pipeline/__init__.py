"""Training side: tasks and models (`experiments/`), the shared loop (`train`), the snapshot
schedule (`schedule`) and the run-file writer (`writer`). Run `python -m pipeline --help`."""
