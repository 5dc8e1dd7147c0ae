import EventLoop
import Foundation
import HTTPEngine
import JSON
import JSONRPC
import Logging

/// The xhrpc service on one loop: listeners, connections, the method table, the
/// principals with their requests, and the transfer engine.
public final class Server {
    public static let name = "xhrpcd"
    public static let version = "0.1.0"

    public let config: ServerConfig
    let loop: Loop
    let logger: Logger
    let registry = MethodRegistry()
    let dispatcher: Dispatcher
    let engine: TransferEngine
    let hub: NotificationHub
    let coalescer: WriteCoalescer
    let requestSettings: RequestSettings
    /// Until principals and tokens exist, every connection acts for this one.
    let localPrincipal: Principal
    /// Loads and saves the principals' persistent cookies (`--state-dir`).
    let cookies: CookiePersistence
    let startedAt = Date()

    private var listeners: [(address: ListenAddress, listener: Listener)] = []
    private var connections: [UInt64: RPCConnection] = [:]
    private var nextConnectionID: UInt64 = 1
    private var shuttingDown = false
    public private(set) var totalConnections: UInt64 = 0

    public init(config: ServerConfig, loop: Loop, logger: Logger) throws {
        self.config = config
        self.loop = loop
        self.logger = logger
        dispatcher = Dispatcher(registry: registry)
        engine = try TransferEngine(loop: loop, options: config.engine)
        hub = try NotificationHub(loop: loop)
        coalescer = try WriteCoalescer(loop: loop)
        requestSettings = RequestSettings(maxBufferBytes: config.maxBufferBytes, maxRedirects: config.maxRedirects)
        localPrincipal = try Principal(name: "local")
        cookies = try CookiePersistence(stateDirectory: config.stateDir, loop: loop, logger: logger)
        cookies.attach(localPrincipal)
        registerMethods()
    }

    /// Every method the server offers, declared once (api/openrpc.json lists the same).
    private func registerMethods() {
        registerServerMethods()
        registerRequestMethods()
        registerTLSMethods()
        registerProxyMethods()
        registerSubscriptionMethods()
        registerFetch()
    }

    /// The declared methods and their parameter names, for the contract test.
    public var methodParameterNames: [String: [String]] { registry.parameterNames }

    public var connectionCount: Int { connections.count }

    // MARK: Listening

    /// Opens every configured listener. Returns their addresses as bound (a TCP port 0
    /// becomes the port the system chose).
    @discardableResult
    public func start() throws -> [ListenAddress] {
        var bound: [ListenAddress] = []
        for address in config.listen {
            let listener: Listener
            let actual: ListenAddress
            switch address {
            case .unix(let path):
                listener = try UnixSocketFile.listen(loop: loop, path: path, mode: config.unixSocketMode)
                actual = address
            case .tcp(let host, let port):
                guard ListenAddress.isLoopback(host) else {
                    throw StartupError(description: "refusing to listen on \(address): TCP on a non-loopback address needs principals with tokens, which this version does not have yet; listen on 127.0.0.1 or ::1, or on a Unix socket")
                }
                listener = try Listener.tcp(loop: loop, host: host, port: port)
                actual = .tcp(host: host, port: listener.boundPort ?? port)
            }
            try listener.listen { [unowned self] result in accepted(result) }
            listeners.append((address, listener))
            bound.append(actual)
            logger.info("listening on \(actual)")
        }
        return bound
    }

    private func accepted(_ result: Result<EventLoop.Stream, UVError>) {
        let stream: EventLoop.Stream
        switch result {
        case .failure(let e):
            logger.warning("accept failed: \(e)")
            return
        case .success(let s):
            stream = s
        }
        guard !shuttingDown else { stream.close(); return }
        let id = nextConnectionID
        nextConnectionID += 1
        let conn = RPCConnection(id: id, stream: stream, dispatcher: dispatcher, limits: config.connection, logger: logger,
                                 coalescer: coalescer)
        if connections.count >= config.maxConnections {
            let err = RPCError.app(.limitExceeded, "Too many connections (limit \(config.maxConnections)); try again later",
                                   ["limit": .int(Int64(config.maxConnections))])
            conn.send(["jsonrpc": "2.0", "error": err.json, "id": .null])
            logger.warning("refusing connection from \(conn.peerDescription): \(config.maxConnections) connections open")
            conn.closeAfterFlush()
            return
        }
        conn.context = ClientSession(connection: conn, principal: localPrincipal)
        conn.onClose = { [unowned self] c in connectionClosed(c) }
        connections[id] = conn
        totalConnections += 1
        do {
            try conn.start()
            logger.debug("connection \(id) from \(conn.peerDescription)")
        } catch {
            logger.warning("cannot read from \(conn.peerDescription): \(error)")
            conn.close(reason: nil)
        }
    }

    /// A connection ended: its requests are aborted and released, its subscriptions end.
    private func connectionClosed(_ c: RPCConnection) {
        connections[c.id] = nil
        guard let session = c.context as? ClientSession else { return }
        c.context = nil
        for id in session.subscriptionIDs { session.principal.subscriptions[id] = nil }
        for handle in session.createdRequests {
            if let r = session.principal.requests[handle] { release(r) }
        }
        let fetches = session.fetches.values
        session.fetches = [:]
        for r in fetches { r.release() }
        logger.debug("connection \(c.id) closed")
        if shuttingDown, connections.isEmpty { finishShutdown() }
    }

    func release(_ r: HTTPRequest) {
        r.release()
        hub.forget(r)
        r.principal.remove(r.handle)
        r.creator?.createdRequests.remove(r.handle)
    }

    /// Runs `body` on the next turn of the loop, outside whatever callback we are in.
    func soon(_ body: @escaping () -> Void) {
        guard let t = try? EventLoop.Timer(loop: loop) else { return }
        t.start(timeout: 0) {
            t.close()
            body()
        }
    }

    // MARK: Shutting down

    private var shutdownDone: (() -> Void)?

    /// Stops accepting, lets queued replies go out, closes every connection, removes the
    /// socket files, stops the engine; `done` runs when no handle is left open.
    public func shutdown(_ done: @escaping () -> Void) {
        guard !shuttingDown else { return }
        shuttingDown = true
        shutdownDone = done
        for (address, listener) in listeners {
            listener.close()
            if case .unix(let path) = address { unlink(path) }
        }
        listeners = []
        if connections.isEmpty { finishShutdown(); return }
        for c in connections.values { c.closeAfterFlush() }
        // A client that never reads would hold the flush forever: give it a second.
        let deadline = try? EventLoop.Timer(loop: loop)
        deadline?.start(timeout: 1000) { [unowned self] in
            deadline?.close()
            for c in connections.values { c.close(reason: "shutting down") }
        }
        pendingDeadline = deadline
    }
    private var pendingDeadline: EventLoop.Timer?

    private func finishShutdown() {
        pendingDeadline?.close()
        pendingDeadline = nil
        for r in localPrincipal.requests.values { release(r) }
        // After the releases: their transfers have ended, so the jars hold all there is.
        cookies.close()
        hub.close()
        coalescer.close()
        engine.shutdown { [self] in
            let done = shutdownDone
            shutdownDone = nil
            done?()
        }
    }
}

/// A reason the server cannot start, said so that the operator knows what to change.
public struct StartupError: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}
