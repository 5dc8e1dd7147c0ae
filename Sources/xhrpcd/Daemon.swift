import ArgumentParser
import CShims
import EventLoop
import Foundation
import HTTPEngine
import Logging
import Service

/// Starts the server on a loop, stops it on SIGINT/SIGTERM (the first signal drains,
/// a second one ends the drain at once), and returns once every handle is closed, so
/// the process exits 0 after a clean stop.
enum Daemon {
    static func run(_ config: ServerConfig, level: Logger.Level, format: StderrLogHandler.Format) throws {
        LoggingSystem.bootstrap { label in
            var h = StderrLogHandler(label: label, format: format)
            h.logLevel = level
            return h
        }
        let logger = Logger(label: "xhrpcd")
        // A client closing mid-write would otherwise kill the process with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        // A parent may hand down a mask that blocks the stop signals; take them back.
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        sigaddset(&stopSignals, SIGINT)
        sigaddset(&stopSignals, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &stopSignals, nil)
        TransferEngine.globalInit()
        // Response buffers are up to --max-buffer-bytes each. A fixed mmap threshold makes
        // glibc map such blocks and hand them back to the system when freed; with its
        // default (dynamic) threshold, thirty vanished 8 MiB buffers stayed in the heap and
        // the process kept 150–220 MiB it no longer used.
        mallopt(M_MMAP_THRESHOLD, 1 << 20)

        let loop = try Loop()
        let server = try Server(config: config, loop: loop, logger: logger)
        // The watchers stay open during the drain, for the second signal, and close
        // when the server is done, so that the loop can end. They are installed before
        // the server listens: a stop signal sent as soon as its socket accepts (a test, a
        // supervisor) must drain it, not kill it with the signal's default action.
        var watchers: [SignalWatcher] = []
        var signalled = false
        let stop = {
            if signalled {
                server.shutdown {}
                return
            }
            signalled = true
            logger.info("stopping (a second SIGTERM or SIGINT stops at once)")
            server.shutdown {
                for w in watchers { w.close() }
                logger.info("stopped")
            }
        }
        watchers = try [SIGINT, SIGTERM].map { try SignalWatcher(loop: loop, signal: $0, stop) }
        do {
            try server.start()
        } catch {
            logger.critical("\(error)")
            for w in watchers { w.close() }
            server.shutdown {}
            loop.run()
            throw ExitCode(1)
        }
        logger.info("\(Server.name) \(Server.version) ready")
        loop.run()
        try loop.close()
    }
}
