"""The local stack: the embedded broker, `tideline platform` (the whole platform on one
machine, `make demo`) and the one-process `tideline demo`."""
