// xhrpc-bench: parse the command line and run one benchmark mode (Command.swift).
// The modes themselves live in DirectBench.swift (libcurl alone) and RPCLoad.swift
// (load through xhrpcd over its Unix socket).
XHRPCBench.main()
