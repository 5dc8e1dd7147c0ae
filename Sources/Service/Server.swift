import EventLoop
import Foundation
import HTTPEngine
import JSON
import JSONRPC
import Logging
import SecureStream

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
    /// The principals, by name, uid and token (`Authentication.swift`).
    let principalTable: PrincipalTable
    /// Every principal, by name: the configured ones and, unless one of them has the
    /// server's uid, "local", the Unix socket owner's.
    var principals: [String: Principal] { principalTable.byName }
    /// Failed `auth` attempts since start, and what connections that never authenticated
    /// sent and received, for an admin's `server.stats`.
    var authFailures: UInt64 = 0
    var anonymousUsage = Principal.Usage()
    /// Loads and saves the principals' persistent cookies (`--state-dir`).
    let cookies: CookiePersistence
    /// Expires unused requests and keeps detached ones (`detach`, `attach`). Lazy only
    /// because it refers back to the server; its timer is made in `init`.
    private(set) lazy var lifetime = ObjectLifetime(server: self, timer: sweepTimer, config: config)
    private let sweepTimer: EventLoop.Timer
    let startedAt = Date()

    var listeners: [(address: ListenAddress, listener: Listener)] = []
    private(set) var connections: [UInt64: RPCConnection] = [:]
    /// Connections answered with a refusal and closing once it is out (a TLS one after
    /// its handshake): a shutdown closes them at once rather than wait for them.
    var refused: [UInt64: RPCConnection] = [:]
    private var nextConnectionID: UInt64 = 1
    public private(set) var totalConnections: UInt64 = 0

    /// Where a graceful stop stands (`Server+Shutdown.swift`).
    var shutdownMachine = ShutdownMachine()
    var shutdownDone: (() -> Void)?
    var drainDeadline: EventLoop.Timer?
    var drainCheckScheduled = false
    var closeDeadline: EventLoop.Timer?

    public init(config: ServerConfig, loop: Loop, logger: Logger) throws {
        self.config = config
        self.loop = loop
        self.logger = logger
        dispatcher = Dispatcher(registry: registry)
        var engineOptions = config.engine
        if engineOptions.userAgent.isEmpty { engineOptions.userAgent = "xhrpc/\(Server.version)" }
        engine = try TransferEngine(loop: loop, options: engineOptions)
        hub = try NotificationHub(loop: loop)
        coalescer = try WriteCoalescer(loop: loop)
        requestSettings = RequestSettings(maxBufferBytes: config.maxBufferBytes, maxRedirects: config.maxRedirects,
                                          maxResponseBytes: config.maxResponseBytes)
        principalTable = try PrincipalTable(config)
        cookies = try CookiePersistence(stateDirectory: config.stateDir, loop: loop, logger: logger)
        for p in principalTable.byName.values.sorted(by: { $0.name < $1.name }) { cookies.attach(p) }
        sweepTimer = try EventLoop.Timer(loop: loop)
        dispatcher.gate = { [unowned self] call in try admit(call) }
        dispatcher.onError = { [unowned self] peer, error in count(error, from: peer) }
        registerMethods()
    }

    /// Every method the server offers, declared once (api/openrpc.json lists the same).
    private func registerMethods() {
        registerServerMethods()
        registerAuthMethods()
        registerRequestMethods()
        registerTLSMethods()
        registerProxyMethods()
        registerSubscriptionMethods()
        registerFetch()
        registerDetachMethods()
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
        // Before any listener opens, so a refused address or a bad certificate leaves
        // nothing behind and no client ever reaches a server that is about to exit.
        let tls = try makeTLSContext()
        for address in config.listen { try checkTCPAllowed(address) }
        for address in config.listen {
            let listener: Listener
            let actual: ListenAddress
            var context: TLSContext?
            switch address {
            case .unix(let path):
                listener = try UnixSocketFile.listen(loop: loop, path: path, mode: config.unixSocketMode)
                actual = address
            case .tcp(let host, let port), .tls(let host, let port):
                listener = try Listener.tcp(loop: loop, host: host, port: port)
                let boundPort = listener.boundPort ?? port
                if case .tls = address {
                    context = tls
                    actual = .tls(host: host, port: boundPort)
                } else {
                    actual = .tcp(host: host, port: boundPort)
                }
            }
            try listener.listen { [unowned self] result in accepted(result, tls: context) }
            listeners.append((address, listener))
            bound.append(actual)
            logger.info("listening on \(actual)")
        }
        lifetime.start()
        return bound
    }

    /// The TLS settings of the `tls:` listeners, loaded once; nil when there is none.
    /// Every failure is a start-up error that names the flag or the file at fault.
    private func makeTLSContext() throws -> TLSContext? {
        guard let first = config.listen.first(where: { if case .tls = $0 { true } else { false } }) else { return nil }
        guard let certificate = config.tlsCertificateFile, let key = config.tlsKeyFile else {
            throw StartupError.tlsNeedsCertificate(first)
        }
        do {
            return try TLSContext(certificateFile: certificate, keyFile: key)
        } catch {
            throw StartupError.tlsUnusable(first, reason: error.description)
        }
    }

    private func accepted(_ result: Result<EventLoop.Stream, UVError>, tls: TLSContext?) {
        let stream: EventLoop.Stream
        switch result {
        case .failure(let e):
            logger.warning("accept failed: \(e)")
            return
        case .success(let s):
            stream = s
        }
        guard let tls else { return adopt(stream) }
        // The handshake runs inside the TLS stream; the connection sees plaintext.
        do {
            adopt(try TLSStream(wrapping: stream, context: tls, handshakeTimeout: config.tlsHandshakeTimeout))
        } catch {
            logger.warning("cannot start TLS with \(stream.peerDescription): \(error)")
            stream.close()
        }
    }

    /// Serves a connected stream as a client connection, as if a listener had accepted
    /// it: the listeners use it (with a TLS stream for a tls: listener), and so does the
    /// fuzzer, which feeds one end of a socket pair with no network at all.
    public func adopt(_ stream: any ByteStream) {
        guard shutdownMachine.phase == .serving else { stream.close(); return }
        let id = nextConnectionID
        nextConnectionID += 1
        let conn = RPCConnection(id: id, stream: stream, dispatcher: dispatcher, limits: config.connection, logger: logger,
                                 coalescer: coalescer)
        if connections.count >= config.maxConnections { reapClosedConnections { _ in true } }
        if connections.count >= config.maxConnections {
            refuse(conn, ServiceError.limitExceeded("maxConnections", max: config.maxConnections,
                                                    "Too many connections (limit \(config.maxConnections)); try again later"))
            return
        }
        if let p = identify(stream) {
            do {
                try makeRoomForConnection(p)
            } catch {
                refuse(conn, error)
                return
            }
            conn.context = ClientSession(connection: conn, principal: p)
        } else {
            awaitAuthentication(conn)
        }
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

    /// Checks that principal `p` may have one more connection, first ending those of
    /// its connections whose clients have already gone: a connection is counted from
    /// accept until its end of input is read, and the loop accepts a whole backlog
    /// before it reads, so after a burst of connect-and-close the count holds clients
    /// that no longer exist (`RPCConnection.endIfPeerClosed`).
    func makeRoomForConnection(_ p: Principal) throws(RPCError) {
        if p.connections >= p.limits.connections {
            reapClosedConnections { ($0.context as? ClientSession)?.principal === p }
        }
        try p.checkRoomForConnection()
    }

    /// Ends the connections chosen by `which` whose peer has closed with nothing left
    /// unread (one non-blocking peek each).
    private func reapClosedConnections(_ which: (RPCConnection) -> Bool) {
        var reaped = 0
        for c in Array(connections.values) where which(c) {
            if c.endIfPeerClosed() { reaped += 1 }
        }
        if reaped > 0 { logger.debug("reaped \(reaped) connections whose clients had gone") }
    }

    /// Answers a connection that cannot be served with `error` and closes it.
    private func refuse(_ conn: RPCConnection, _ error: RPCError) {
        conn.send(["jsonrpc": "2.0", "error": error.json, "id": .null])
        logger.warning("refusing connection from \(conn.peerDescription): \(error.message)")
        refused[conn.id] = conn
        conn.onClose = { [unowned self] c in refused[c.id] = nil }
        conn.closeAfterFlush()
    }

    /// A connection ended: its requests are aborted and released, its subscriptions end.
    private func connectionClosed(_ c: RPCConnection) {
        connections[c.id] = nil
        let context = c.context
        c.context = nil
        if let pending = context as? PendingAuthentication { endPending(pending, of: c) }
        if let session = context as? ClientSession { end(session) }
        logger.debug("connection \(c.id) closed")
        // Every connection counts for a stop, authenticated or not.
        drainMayHaveEnded()
        perform(shutdownMachine.connectionClosed(remaining: connections.count))
    }

    /// A client session ended with its connection: its subscriptions end, and the
    /// objects it created (and did not detach) are released.
    private func end(_ session: ClientSession) {
        session.end()
        for id in session.subscriptionIDs { session.principal.subscriptions[id] = nil }
        for handle in session.createdObjects {
            if let o = session.principal.objects[handle] { release(o) }
        }
        let fetches = session.fetches.values
        session.fetches = [:]
        for r in fetches { r.release() }
    }

    /// Ends an object of any kind and takes it out of the tables.
    func release(_ o: any SessionObject) {
        o.release()
        hub.forget(o)
        o.principal.remove(o.handle)
        o.creator?.createdObjects.remove(o.handle)
        drainMayHaveEnded()
    }

    /// Refuses to start a transfer once a stop has begun: the drain waits for the
    /// transfers in flight, and new ones would keep it going.
    func checkAcceptingTransfers() throws(RPCError) {
        guard shutdownMachine.acceptsTransfers else { throw ServiceError.shuttingDown }
    }

    /// Runs `body` on the next turn of the loop, outside whatever callback we are in.
    func soon(_ body: @escaping () -> Void) {
        guard let t = try? EventLoop.Timer(loop: loop) else { return }
        t.start(timeout: 0) {
            t.close()
            body()
        }
    }
}

/// What objects see of the server (`ObjectEnvironment`).
extension Server: ObjectEnvironment {
    var clock: ServerClock { config.clock }
    var egressProxy: ProxySettings? { config.egressProxy }
    func cookiesMayHaveChanged(for principal: Principal) { cookies.jarMayHaveChanged(principal) }
    func objectMayHaveSettled() { drainMayHaveEnded() }
}

