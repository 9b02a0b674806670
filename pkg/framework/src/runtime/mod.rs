//! Process runtime shared by controller binaries: leader election, probes, signals, logging.
