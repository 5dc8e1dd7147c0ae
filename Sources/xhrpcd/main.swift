// xhrpcd: parse the command line and run the server (Command.swift, Daemon.swift).
XHRPCD.main()
